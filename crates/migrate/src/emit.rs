//! The lmdir TOML text of the translated settings: only keys the OpenLDAP configuration (or the
//! caller) set, so every other key keeps lmdir's default; the notes close the file as comments.

use lmdir_config::{AccessRule, IndexKind, Limit, LimitsRule};

use crate::{Note, NoteKind};

/// The settings found, each `None`/empty when the source did not set it.
#[derive(Debug, Default)]
pub(crate) struct Draft {
    pub listen: Vec<String>,
    pub tls_certificate: Option<String>,
    pub tls_key: Option<String>,
    pub size_limit: Option<u64>,
    pub time_limit_seconds: Option<u64>,
    pub lookthrough_limit: Option<u64>,
    pub idle_timeout_seconds: Option<u64>,
    pub password_hash: Option<String>,
    pub suffix: Option<String>,
    pub directory: Option<std::path::PathBuf>,
    pub rootdn: Option<String>,
    pub rootpw: Option<String>,
    pub schema_files: Vec<String>,
    pub sync: Option<bool>,
    /// Whether the memberof overlay was configured (slapd computes memberOf only then).
    pub memberof: bool,
    pub index: Vec<(String, Vec<IndexKind>)>,
    pub access: Vec<AccessRule>,
    pub limits: Vec<LimitsRule>,
    pub password_policy_default: Option<String>,
    pub disallow_anonymous_bind: bool,
    pub require_authentication: bool,
    /// `security` factors: TLS before binds and writes, and before every other operation.
    pub require_tls: bool,
    pub require_tls_for_reads: bool,
    pub write_timeout_seconds: Option<u64>,
    pub anonymous_pdu_bytes_max: Option<u64>,
    pub pdu_bytes_max: Option<u64>,
    pub filter_depth_max: Option<u64>,
    pub authz_policy: Option<String>,
    pub replication: Replication,
    pub integrity: Integrity,
    /// `dynlist-attrset` lines as `[[dynlist]]` rules.
    pub dynlist: Vec<lmdir_config::DynlistRule>,
}

/// `[integrity]`: the refint and unique overlays.
#[derive(Debug, Default)]
pub(crate) struct Integrity {
    pub referential_attributes: Vec<String>,
    pub referential_nothing: Option<String>,
    pub referential_modifiers_name: Option<String>,
    /// (base, attributes) of each `unique_uri`.
    pub unique: Vec<(String, Vec<String>)>,
}

/// `[replication]`: `serverid`, `overlay syncprov`, `syncprov-sessionlog`, `syncrepl`.
#[derive(Debug, Default)]
pub(crate) struct Replication {
    pub server_id: Option<u16>,
    pub provider: bool,
    pub session_log_entries: Option<u64>,
    pub consumers: Vec<Consumer>,
    /// The URL of the `serverid N URL` line taken as this server's (multi-provider).
    pub own_url: Option<String>,
    /// `updateref URL`: where it was and the URL.
    pub update_referral: Option<(crate::Location, String, String)>,
}

/// One `syncrepl` line as a `[[replication.consumer]]`.
#[derive(Debug, Default)]
pub(crate) struct Consumer {
    pub rid: u16,
    pub provider: String,
    pub search_base: String,
    pub refresh_only: bool,
    pub interval_seconds: Option<u64>,
    pub retry_seconds: Option<u64>,
    pub bind_dn: String,
    pub credentials: String,
    pub starttls: bool,
    pub tls_ca_certificate: String,
}

fn quoted(text: &str) -> String {
    toml::Value::String(text.to_string()).to_string()
}

/// A bare TOML key when the name allows one (attribute names almost always do).
fn key(name: &str) -> String {
    let bare = !name.is_empty()
        && name
            .chars()
            .all(|character| character.is_ascii_alphanumeric() || matches!(character, '-' | '_'));
    if bare {
        name.to_string()
    } else {
        quoted(name)
    }
}

fn quoted_list<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    let items: Vec<String> = items.into_iter().map(quoted).collect();
    format!("[{}]", items.join(", "))
}

pub(crate) fn emit(draft: &Draft, notes: &[Note]) -> String {
    let mut text = String::from(
        "# Written by `lmdir migrate` from an OpenLDAP configuration. Keys not set here keep\n\
         # lmdir's defaults (crates/config/README.md). Review the notes at the end.\n\n[server]\n",
    );
    if draft.listen.is_empty() {
        text += "# slapd takes its listeners from -h on its command line: set `listen` here.\n";
    } else {
        text += &format!(
            "listen = {}\n",
            quoted_list(draft.listen.iter().map(String::as_str))
        );
    }
    let strings = [
        ("tls_certificate", &draft.tls_certificate),
        ("tls_key", &draft.tls_key),
        ("password_hash", &draft.password_hash),
        ("authz_policy", &draft.authz_policy),
    ];
    let numbers = [
        ("size_limit", draft.size_limit),
        ("time_limit_seconds", draft.time_limit_seconds),
        ("lookthrough_limit", draft.lookthrough_limit),
        ("idle_timeout_seconds", draft.idle_timeout_seconds),
        ("write_timeout_seconds", draft.write_timeout_seconds),
        ("anonymous_pdu_bytes_max", draft.anonymous_pdu_bytes_max),
        ("pdu_bytes_max", draft.pdu_bytes_max),
        ("filter_depth_max", draft.filter_depth_max),
    ];
    for (key, on) in [
        ("disallow_anonymous_bind", draft.disallow_anonymous_bind),
        ("require_authentication", draft.require_authentication),
        ("require_tls", draft.require_tls),
        ("require_tls_for_reads", draft.require_tls_for_reads),
    ] {
        if on {
            text += &format!("{key} = true\n");
        }
    }
    for (key, value) in strings {
        if let Some(value) = value {
            text += &format!("{key} = {}\n", quoted(value));
        }
    }
    for (key, value) in numbers {
        if let Some(value) = value {
            text += &format!("{key} = {value}\n");
        }
    }
    emit_database(draft, &mut text);
    emit_replication(&draft.replication, &mut text);
    emit_integrity(&draft.integrity, &mut text);
    for rule in &draft.dynlist {
        text += &format!(
            "\n[[dynlist]]\nobject_class = {}\nurl_attribute = {}\nmember_attribute = {}\n",
            quoted(&rule.object_class),
            quoted(&rule.url_attribute),
            quoted(&rule.member_attribute)
        );
        if !rule.member_of_attribute.is_empty() {
            text += &format!(
                "member_of_attribute = {}\n",
                quoted(&rule.member_of_attribute)
            );
        }
    }
    emit_access(&draft.access, &mut text);
    emit_limits(&draft.limits, &mut text);
    emit_notes(notes, &mut text);
    text
}

fn emit_database(draft: &Draft, text: &mut String) {
    *text += "\n[database]\n";
    let directory = draft
        .directory
        .as_ref()
        .map(|directory| directory.display().to_string());
    let strings = [
        ("suffix", &draft.suffix),
        ("directory", &directory),
        ("rootdn", &draft.rootdn),
        ("rootpw", &draft.rootpw),
    ];
    for (key, value) in strings {
        if let Some(value) = value {
            *text += &format!("{key} = {}\n", quoted(value));
        }
    }
    if directory.is_none() {
        *text += "# directory: lmdir's own LMDB directory (never slapd's; the formats differ).\n";
    }
    if !draft.schema_files.is_empty() {
        *text += "schema_files = [\n";
        for file in &draft.schema_files {
            *text += &format!("    {},\n", quoted(file));
        }
        *text += "]\n";
    }
    if let Some(dn) = &draft.password_policy_default {
        *text += &format!("password_policy_default = {}\n", quoted(dn));
    }
    if let Some(sync) = draft.sync {
        *text += &format!("sync = {sync}\n");
    }
    *text += &format!(
        "# slapd maintains memberOf only with the memberof overlay.\nmemberof = {}\n",
        draft.memberof
    );
    if draft.index.is_empty() {
        *text += "# No index directives: lmdir's default index set applies.\n";
        return;
    }
    *text += "\n[database.index]\n";
    for (attribute, kinds) in &draft.index {
        let kinds = quoted_list(kinds.iter().map(|kind| kind.name()));
        *text += &format!("{} = {kinds}\n", key(attribute));
    }
}

fn emit_integrity(integrity: &Integrity, text: &mut String) {
    let referential = !integrity.referential_attributes.is_empty()
        || integrity.referential_nothing.is_some()
        || integrity.referential_modifiers_name.is_some();
    if referential {
        *text += "\n[integrity]\n";
        *text += &format!(
            "referential_attributes = {}\n",
            quoted_list(integrity.referential_attributes.iter().map(String::as_str))
        );
        if let Some(nothing) = &integrity.referential_nothing {
            *text += &format!("referential_nothing = {}\n", quoted(nothing));
        }
        if let Some(name) = &integrity.referential_modifiers_name {
            *text += &format!("referential_modifiers_name = {}\n", quoted(name));
        }
    }
    for (base, attributes) in &integrity.unique {
        *text += &format!(
            "\n[[integrity.unique]]\nbase = {}\nattributes = {}\n",
            quoted(base),
            quoted_list(attributes.iter().map(String::as_str))
        );
    }
}

fn emit_replication(replication: &Replication, text: &mut String) {
    if replication.server_id.is_none()
        && !replication.provider
        && replication.session_log_entries.is_none()
        && replication.consumers.is_empty()
    {
        return;
    }
    *text += "\n[replication]\n";
    if let Some(id) = replication.server_id {
        *text += &format!("server_id = {id}\n");
    }
    if replication.provider {
        *text += "provider = true\n";
    }
    if let Some(entries) = replication.session_log_entries {
        *text += &format!("session_log_entries = {entries}\n");
    }
    for consumer in &replication.consumers {
        *text += &format!(
            "\n[[replication.consumer]]\nrid = {}\nprovider = {}\nsearch_base = {}\n",
            consumer.rid,
            quoted(&consumer.provider),
            quoted(&consumer.search_base)
        );
        if consumer.refresh_only {
            *text += "type = \"refreshOnly\"\n";
        }
        for (key, value) in [
            ("interval_seconds", consumer.interval_seconds),
            ("retry_seconds", consumer.retry_seconds),
        ] {
            if let Some(value) = value {
                *text += &format!("{key} = {value}\n");
            }
        }
        for (key, value) in [
            ("bind_dn", &consumer.bind_dn),
            ("credentials", &consumer.credentials),
            ("tls_ca_certificate", &consumer.tls_ca_certificate),
        ] {
            if !value.is_empty() {
                *text += &format!("{key} = {}\n", quoted(value));
            }
        }
        if consumer.starttls {
            *text += "starttls = true\n";
        }
    }
}

/// Said above translated rules: slapd has no rule for lmdir's own secrets, so lmdir keeps them
/// by a rule of its own placed before these (`AccessPolicy::lmdir_secret_rules`).
const LMDIR_SECRET_RULE_COMMENT: &str = "\n# lmdir places one rule of its own before these: \
    its HTTP bearer token hashes (lmdirBearerToken, which slapd\n# has no counterpart of) are \
    written by their entry and the rootdn only, read only by the replicas [replication]\n# names \
    (others may only authenticate with them), whatever the rules below say.\n";

fn emit_access(rules: &[AccessRule], text: &mut String) {
    if !rules.is_empty() {
        *text += LMDIR_SECRET_RULE_COMMENT;
    }
    for rule in rules {
        let mut target = Vec::new();
        let scopes = [
            ("subtree", &rule.to.subtree),
            ("dn", &rule.to.dn),
            ("one", &rule.to.one),
            ("children", &rule.to.children),
        ];
        for (key, dn) in scopes {
            if let Some(dn) = dn {
                target.push(format!("{key} = {}", quoted(dn)));
            }
        }
        if let Some(filter) = &rule.to.filter {
            target.push(format!("filter = {}", quoted(filter)));
        }
        if !rule.to.attrs.is_empty() {
            target.push(format!(
                "attrs = {}",
                quoted_list(rule.to.attrs.iter().map(String::as_str))
            ));
        }
        let target = if target.is_empty() {
            "{}".to_string()
        } else {
            format!("{{ {} }}", target.join(", "))
        };
        *text += &format!("\n[[access]]\nto = {target}\nby = [\n");
        for clause in &rule.by {
            *text += &format!(
                "    {{ who = {}, access = {} }},\n",
                quoted(&clause.who.to_string()),
                quoted(clause.access.word())
            );
        }
        *text += "]\n";
    }
}

fn emit_limits(rules: &[LimitsRule], text: &mut String) {
    for rule in rules {
        *text += &format!("\n[[limits]]\nwho = {}\n", quoted(&rule.who.to_string()));
        for (key, limit) in rule.keyed_limits() {
            match limit {
                Some(Limit::Count(count)) => *text += &format!("{key} = {count}\n"),
                Some(Limit::Unlimited) => *text += &format!("{key} = \"unlimited\"\n"),
                None => {}
            }
        }
    }
}

fn emit_notes(notes: &[Note], text: &mut String) {
    if notes.is_empty() {
        *text += "\n# Every directive was translated.\n";
        return;
    }
    *text +=
        "\n# Notes: directives not translated one to one (file:line: kind: directive: reason)\n";
    for line in crate::report(notes) {
        *text += &format!("# {line}\n");
    }
    let lost = notes
        .iter()
        .filter(|note| note.kind == NoteKind::NotTranslated)
        .count();
    *text += &format!("# {lost} directive(s) NOT TRANSLATED.\n");
}
