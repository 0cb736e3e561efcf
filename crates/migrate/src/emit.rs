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
    ];
    let numbers = [
        ("size_limit", draft.size_limit),
        ("time_limit_seconds", draft.time_limit_seconds),
        ("lookthrough_limit", draft.lookthrough_limit),
        ("idle_timeout_seconds", draft.idle_timeout_seconds),
    ];
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

fn emit_access(rules: &[AccessRule], text: &mut String) {
    for rule in rules {
        let mut target = Vec::new();
        if let Some(subtree) = &rule.to.subtree {
            target.push(format!("subtree = {}", quoted(subtree)));
        }
        if let Some(dn) = &rule.to.dn {
            target.push(format!("dn = {}", quoted(dn)));
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
    let mut sorted: Vec<&Note> = notes.iter().collect();
    // What needs the administrator first.
    sorted.sort_by_key(|note| std::cmp::Reverse(note.kind));
    *text +=
        "\n# Notes: directives not translated one to one (file:line: kind: directive: reason)\n";
    for note in sorted {
        let line = note.to_string().replace('\n', " ");
        *text += &format!("# {line}\n");
    }
    let lost = notes
        .iter()
        .filter(|note| note.kind == NoteKind::NotTranslated)
        .count();
    *text += &format!("# {lost} directive(s) NOT TRANSLATED.\n");
}
