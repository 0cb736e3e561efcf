//! Directives → the lmdir settings they mean, with a note for everything else.
//!
//! The directives are cut into sections at each `database` directive; the global section (with
//! cn=config's frontend database) applies to all. The first mdb/hdb/bdb database with a suffix is
//! migrated; every other database is listed.

use std::collections::BTreeMap;

use lmdir_config::{AccessClause, AccessLevel, AccessRule, AccessTarget, IndexKind, Who};

use crate::access::translate_access;
use crate::canonical;
use crate::emit::{emit, Draft};
use crate::{
    Directive, Location, MigrateError, MigrateOptions, Migration, Note, NoteKind, Parsed,
    SchemaFile, SchemaSource,
};

mod integrity;
mod settings;

use settings::{defaults_note, flag_on};

/// Backends whose data `lmdir load` takes from `slapcat`.
const DATA_BACKENDS: &[&str] = &["mdb", "hdb", "bdb"];

/// Directives that configure slapd's process or LMDB sizing, which lmdir does on its own
/// (keywords as `Directive::keyword` gives them: lowercase, no `-` or `_`).
const NOT_NEEDED: &[(&str, &str)] = &[
    ("pidfile", "lmdir does not write a pid file"),
    ("argsfile", "lmdir does not write an args file"),
    ("modulepath", "lmdir has no loadable modules"),
    ("moduleload", "lmdir has no loadable modules; what a module provided is judged at its `database` or `overlay` line"),
    ("toolthreads", "lmdir load uses every core (--threads)"),
    ("threads", "lmdir sizes its thread pools itself"),
    ("loglevel", "lmdir's log levels differ: set [server] log"),
    ("directory", "lmdir keeps its own LMDB files (not slapd's format) in [database] directory"),
    ("maxsize", "lmdir's map grows by itself"),
    ("checkpoint", "lmdir syncs every commit ([database] sync)"),
    ("envflags", "lmdir opens LMDB itself"),
    ("mode", "lmdir creates its files with the process umask"),
    ("dbpagesize", "lmdir uses LMDB's page size"),
    ("rtxnsize", "lmdir's readers use one read transaction per operation"),
    ("searchstack", "lmdir's search needs no stack setting"),
    ("rootdse", "lmdir builds its root DSE itself"),
    ("syncprovcheckpoint", "lmdir stores the contextCSN in the transaction of every change"),
];

/// Settings at slapd's default value (keyword, value; values compared case-insensitively):
/// `slaptest` and cn=config write them out, slapd.conf usually leaves them out. Either way
/// they mean the same, so they are skipped without a note, and every route gives the same
/// report; what lmdir's own defaults change is said once (`defaults_note`).
const SLAPD_DEFAULTS: &[(&str, &str)] = &[
    ("addcontentacl", "false"),
    ("attributeoptions", "lang-"),
    ("authzpolicy", "none"),
    ("concurrency", "0"),
    ("connmaxpending", "100"),
    ("connmaxpendingauth", "1000"),
    ("dbnosync", "false"),
    ("gentlehup", "false"),
    ("idletimeout", "0"),
    ("indexhash64", "false"),
    ("indexintlen", "4"),
    ("indexsubstranylen", "4"),
    ("indexsubstranystep", "2"),
    ("indexsubstrifmaxlen", "4"),
    ("indexsubstrifminlen", "2"),
    ("lastbind", "false"),
    ("lastmod", "on"),
    ("lastmod", "true"),
    ("listenerthreads", "1"),
    ("localssf", "71"),
    ("loglevel", "0"),
    ("maxderefdepth", "0"),
    ("maxderefdepth", "15"),
    ("maxentrysize", "0"),
    ("maxfilterdepth", "1000"),
    ("maxreaders", "0"),
    ("maxsize", "10485760"),
    ("memberofdangling", "ignore"),
    ("memberofgroupoc", "groupOfNames"),
    ("memberofmemberad", "member"),
    ("memberofmemberofad", "memberOf"),
    ("mirrormode", "false"),
    ("mode", "0600"),
    ("multiprovider", "false"),
    ("ppolicydisablewrite", "false"),
    ("ppolicyforwardupdates", "false"),
    ("ppolicyhashcleartext", "false"),
    ("ppolicysendnetscapecontrols", "false"),
    ("ppolicyuselockout", "false"),
    ("readonly", "false"),
    ("require", "none"),
    ("reverselookup", "false"),
    ("rtxnsize", "10000"),
    ("saslauxpropsdontusecopyignore", "false"),
    ("saslsecprops", "noplain,noanonymous"),
    ("schemadn", "cn=Subschema"),
    ("searchstack", "16"),
    ("sockbufmaxincoming", "262143"),
    ("sockbufmaxincomingauth", "16777215"),
    ("syncusesubentry", "false"),
    ("threadqueues", "1"),
    ("threads", "16"),
    ("tlsprotocolmin", "0.0"),
    ("tlsverifyclient", "never"),
    ("toolthreads", "1"),
    ("writetimeout", "0"),
];

/// Written by cn=config about itself, not settings: skipped without a note on every route.
/// `monitoring` is here too: lmdir always serves cn=Monitor (slapd's mdb default is on).
const CONFIG_BOOKKEEPING: &[&str] = &["configfile", "configdir", "monitoring"];

/// slapd's own tuning, which has no effect on what a client sees.
const SLAPD_TUNING: &[&str] = &[
    "concurrency",
    "connmaxpending",
    "connmaxpendingauth",
    "gentlehup",
    "indexhash64",
    "indexintlen",
    "indexsubstranylen",
    "indexsubstranystep",
    "indexsubstrifmaxlen",
    "indexsubstrifminlen",
    "listenerthreads",
    "threadqueues",
];

/// slapd's limits when none is configured (slapd.conf(5): `sizelimit 500`, `timelimit 3600`).
const SLAPD_SIZE_LIMIT: u64 = 500;
const SLAPD_TIME_LIMIT_SECONDS: u64 = 3600;

/// Sizes in `sizelimit` / `timelimit` directives: soft, hard, and (size only) unchecked.
#[derive(Debug, Clone, Copy, Default)]
struct Limits {
    soft: Option<u64>,
    hard: Option<u64>,
    unchecked: Option<u64>,
}

/// The settings of one section that later sections may override.
#[derive(Default)]
struct SectionSettings {
    size: Limits,
    time: Limits,
}

pub(crate) fn translate(
    parsed: &Parsed,
    options: &MigrateOptions,
) -> Result<Migration, MigrateError> {
    let sections = split_sections(&parsed.directives);
    let chosen = choose_database(&sections)?;
    let mut translator = Translator {
        draft: Draft::default(),
        notes: parsed.notes.clone(),
        access: Vec::new(),
        global_access: Vec::new(),
        global: SectionSettings::default(),
        database: SectionSettings::default(),
        tls_certificate: None,
        tls_key: None,
        indexes: BTreeMap::new(),
        index_default: Vec::new(),
        ppolicy: PpolicyFlags::default(),
        access_widening: Vec::new(),
        limits_lost: Vec::new(),
    };
    for (index, section) in sections.iter().enumerate() {
        match section.kind {
            SectionKind::Global => {
                for directive in &section.directives {
                    translator.global_directive(directive);
                }
            }
            _ if index == chosen => {
                for directive in &section.directives {
                    translator.database_directive(directive);
                }
            }
            _ => translator.other_database(section),
        }
    }
    translator.finish(parsed, options)
}

#[derive(Debug, PartialEq, Eq)]
enum SectionKind {
    Global,
    Database,
}

struct Section<'a> {
    kind: SectionKind,
    /// The `database` directive opening it (none for the global section).
    opening: Option<&'a Directive>,
    directives: Vec<&'a Directive>,
}

impl Section<'_> {
    fn backend(&self) -> String {
        self.opening
            .and_then(|directive| directive.arguments().first())
            .map(|backend| backend.to_ascii_lowercase())
            .unwrap_or_default()
    }
}

fn split_sections(directives: &[Directive]) -> Vec<Section<'_>> {
    let mut sections = vec![Section {
        kind: SectionKind::Global,
        opening: None,
        directives: Vec::new(),
    }];
    let mut current = 0;
    for directive in directives {
        if directive.keyword() != "database" {
            sections[current].directives.push(directive);
            continue;
        }
        let is_frontend = directive
            .arguments()
            .first()
            .is_some_and(|backend| backend.eq_ignore_ascii_case("frontend"));
        // The frontend database holds the global settings (cn=config's `olcDatabase: frontend`).
        if is_frontend {
            current = 0;
            continue;
        }
        sections.push(Section {
            kind: SectionKind::Database,
            opening: Some(directive),
            directives: Vec::new(),
        });
        current = sections.len() - 1;
    }
    sections
}

fn choose_database(sections: &[Section<'_>]) -> Result<usize, MigrateError> {
    sections
        .iter()
        .position(|section| {
            section.kind == SectionKind::Database
                && DATA_BACKENDS.contains(&section.backend().as_str())
                && section
                    .directives
                    .iter()
                    .any(|directive| directive.keyword() == "suffix")
        })
        .ok_or_else(|| {
            MigrateError::new(
                None,
                "no mdb, hdb or bdb database with a suffix: nothing for lmdir to serve",
            )
        })
}

struct Translator<'a> {
    draft: Draft,
    notes: Vec<Note>,
    /// The chosen database's `access` directives.
    access: Vec<&'a Directive>,
    global_access: Vec<&'a Directive>,
    global: SectionSettings,
    database: SectionSettings,
    tls_certificate: Option<(&'a Directive, String)>,
    tls_key: Option<(&'a Directive, String)>,
    indexes: BTreeMap<String, (String, Vec<IndexKind>)>,
    /// `index default` kinds, for `index attr` lines that name none.
    index_default: Vec<IndexKind>,
    /// `overlay ppolicy` and its flags, judged together at the end.
    ppolicy: PpolicyFlags<'a>,
    /// What access translation left out where lmdir may grant more than slapd.
    access_widening: Vec<Note>,
    /// Limits (`limits`, `sizelimit`, `timelimit`) left out: lmdir's defaults then stand where
    /// slapd had a limit of the site's choosing, tighter or looser.
    limits_lost: Vec<Note>,
}

/// What `overlay ppolicy` and its `ppolicy_*` flags said.
#[derive(Default)]
struct PpolicyFlags<'a> {
    overlay: Option<&'a Directive>,
    use_lockout: bool,
    hash_cleartext: Option<&'a Directive>,
}

impl<'a> Translator<'a> {
    /// A limit left out: noted, and kept for the refusal unless the caller accepts it.
    fn limit_lost(&mut self, directive: &Directive, reason: impl Into<String>) {
        self.note(directive, NoteKind::NotTranslated, reason);
        let note = self.notes.last().cloned();
        self.limits_lost.extend(note);
    }

    fn note(&mut self, directive: &Directive, kind: NoteKind, reason: impl Into<String>) {
        self.notes.push(Note {
            location: directive.location.clone(),
            directive: directive.text.clone(),
            kind,
            reason: reason.into(),
        });
    }

    fn other_database(&mut self, section: &Section<'a>) {
        let Some(opening) = section.opening else {
            return;
        };
        let backend = section.backend();
        if backend == "config" {
            // cn=config's own database (always there in a slapd.d): lmdir's configuration is
            // its TOML file. Silent, so a slapd.d reports what its slapd.conf reports.
            return;
        }
        let reason = if backend == "monitor" {
            "lmdir serves cn=Monitor itself, without a database".to_string()
        } else {
            let suffixes: Vec<&str> = section
                .directives
                .iter()
                .filter(|directive| directive.keyword() == "suffix")
                .filter_map(|directive| directive.arguments().first().map(String::as_str))
                .collect();
            format!(
                "lmdir serves one database; this {backend} database (suffix {suffixes:?}, {} \
                 directives) is not migrated",
                section.directives.len()
            )
        };
        let kind = if backend == "monitor" {
            NoteKind::NotNeeded
        } else {
            NoteKind::NotTranslated
        };
        self.note(opening, kind, reason);
    }

    /// Directives valid in the global section (and, for limits and access, in a database).
    fn global_directive(&mut self, directive: &'a Directive) {
        let keyword = directive.keyword();
        match keyword.as_str() {
            _ if self.is_default(directive) => {}
            "access" => self.global_access.push(directive),
            "limits" => self.limits_rule(directive),
            "sizelimit" | "timelimit" => {
                if let Some(limits) = self.parse_limits(directive) {
                    let target = if keyword == "sizelimit" {
                        &mut self.global.size
                    } else {
                        &mut self.global.time
                    };
                    *target = limits;
                }
            }
            "tlscertificatefile" => {
                self.tls_certificate = self.single(directive).map(|path| (directive, path))
            }
            "tlscertificatekeyfile" => {
                self.tls_key = self.single(directive).map(|path| (directive, path))
            }
            "passwordhash" => self.password_hash(directive),
            "idletimeout" => {
                if let Some(seconds) = self.number(directive) {
                    self.draft.idle_timeout_seconds = Some(seconds);
                }
            }
            "disallow" | "disallows" => self.disallow(directive),
            "require" | "requires" => self.require(directive),
            "security" => self.security(directive),
            "writetimeout" | "sockbufmaxincoming" | "sockbufmaxincomingauth" | "maxfilterdepth" => {
                self.server_number(directive)
            }
            "authzpolicy" => self.authz_policy(directive),
            "serverid" => self.server_id(directive),
            _ => self.common_directive(directive),
        }
    }

    fn database_directive(&mut self, directive: &'a Directive) {
        let keyword = directive.keyword();
        match keyword.as_str() {
            "suffix" => match (self.draft.suffix.is_some(), self.single(directive)) {
                (false, Some(suffix)) => self.draft.suffix = Some(suffix),
                (true, _) => self.note(
                    directive,
                    NoteKind::NotTranslated,
                    "lmdir serves one suffix per database; only the first is migrated",
                ),
                (false, None) => {}
            },
            "rootdn" => self.draft.rootdn = self.single(directive),
            "rootpw" => self.draft.rootpw = self.single(directive),
            "index" => self.index(directive),
            "access" => self.access.push(directive),
            "sizelimit" | "timelimit" => {
                if let Some(limits) = self.parse_limits(directive) {
                    let target = if keyword == "sizelimit" {
                        &mut self.database.size
                    } else {
                        &mut self.database.time
                    };
                    *target = limits;
                }
            }
            // slapd.conf's `dbnosync` has no argument; cn=config's olcDbNoSync is TRUE/FALSE.
            "dbnosync"
                if directive
                    .arguments()
                    .first()
                    .is_none_or(|value| value.eq_ignore_ascii_case("true")) =>
            {
                self.draft.sync = Some(false)
            }
            "overlay" => self.overlay(directive),
            "limits" => self.limits_rule(directive),
            _ if self.integrity_directive(&keyword, directive) => {}
            _ if self.is_default(directive) => {}
            "ppolicydefault" => self.draft.password_policy_default = self.single(directive),
            "ppolicyuselockout" => self.ppolicy.use_lockout = flag_on(directive),
            "ppolicyhashcleartext" if flag_on(directive) => {
                self.ppolicy.hash_cleartext = Some(directive)
            }
            "syncprovsessionlog" => self.session_log(directive),
            "syncrepl" => self.syncrepl(directive),
            "updateref" => {
                if let Some(url) = self.single(directive) {
                    self.draft.replication.update_referral =
                        Some((directive.location.clone(), directive.text.clone(), url))
                }
            }
            "mirrormode" | "multiprovider" if flag_on(directive) => self.note(
                directive,
                NoteKind::NotNeeded,
                "lmdir is multi-provider when it has [replication] server_id, provider = true \
                 and a consumer of every other provider",
            ),
            // slapd accepts global directives in a database section too.
            _ => self.global_directive(directive),
        }
    }

    fn common_directive(&mut self, directive: &Directive) {
        let keyword = directive.keyword();
        if keyword == "lastmod" {
            self.lastmod(directive);
            return;
        }
        let value = directive.arguments().join(" ");
        if self.is_default(directive) {
            return;
        }
        if keyword == "memberofrefint" {
            let (kind, reason) = if value.eq_ignore_ascii_case("true") {
                (
                    NoteKind::NotNeeded,
                    "lmdir's memberOf upkeep removes deleted members from groups too",
                )
            } else {
                (
                    NoteKind::Approximated,
                    "lmdir's memberOf upkeep also removes deleted members from groups",
                )
            };
            self.note(directive, kind, reason);
            return;
        }
        if SLAPD_TUNING.contains(&keyword.as_str()) {
            self.note(
                directive,
                NoteKind::NotNeeded,
                "slapd tuning without effect on answers",
            );
            return;
        }
        if let Some((_, reason)) = NOT_NEEDED.iter().find(|(name, _)| *name == keyword) {
            self.note(directive, NoteKind::NotNeeded, *reason);
            return;
        }
        let reason = match keyword.as_str() {
            "updateref" => "a read-only lmdir replica (consumers without server_id) refers \
                            writes to its first consumer's provider, not to this URL"
                .to_string(),
            "readonly" => "lmdir has no read-only mode".to_string(),
            "allow" | "allows" => {
                "lmdir allows none of these: LDAPv3 only, no anonymous updates".to_string()
            }
            keyword if keyword.starts_with("tls") => {
                "lmdir takes only the certificate and key files; no CA, client verification or cipher settings"
                    .to_string()
            }
            _ => "no lmdir counterpart".to_string(),
        };
        self.note(directive, NoteKind::NotTranslated, reason);
    }

    fn lastmod(&mut self, directive: &Directive) {
        let on = directive
            .arguments()
            .first()
            .is_some_and(|value| matches!(value.to_ascii_lowercase().as_str(), "on" | "true"));
        if on {
            self.note(
                directive,
                NoteKind::NotNeeded,
                "lmdir always maintains the operational attributes",
            );
        } else {
            self.note(
                directive,
                NoteKind::NotTranslated,
                "lmdir always maintains the operational attributes",
            );
        }
    }

    fn single(&mut self, directive: &Directive) -> Option<String> {
        match directive.arguments() {
            [value] => Some(value.clone()),
            _ => {
                self.note(
                    directive,
                    NoteKind::NotTranslated,
                    "expected exactly one argument",
                );
                None
            }
        }
    }

    fn number(&mut self, directive: &Directive) -> Option<u64> {
        let value = self.single(directive)?;
        match value.parse() {
            Ok(number) => Some(number),
            Err(_) => {
                self.note(
                    directive,
                    NoteKind::NotTranslated,
                    format!("{value:?} is not a number"),
                );
                None
            }
        }
    }

    fn password_hash(&mut self, directive: &Directive) {
        let Some(first) = directive.arguments().first() else {
            self.note(directive, NoteKind::NotTranslated, "no scheme given");
            return;
        };
        let scheme = first.trim_start_matches('{').trim_end_matches('}');
        match lmdir_config::PASSWORD_HASH_SCHEMES
            .iter()
            .find(|known| known.eq_ignore_ascii_case(scheme))
        {
            Some(known) => {
                self.draft.password_hash = Some(known.to_string());
                if directive.arguments().len() > 1 {
                    self.note(
                        directive,
                        NoteKind::Approximated,
                        "lmdir hashes with one scheme: the first is used",
                    );
                }
            }
            None => self.note(
                directive,
                NoteKind::NotTranslated,
                format!("lmdir cannot hash with {first}; it keeps its default (SSHA)"),
            ),
        }
    }

    fn overlay(&mut self, directive: &'a Directive) {
        let name = directive.arguments().first().cloned().unwrap_or_default();
        match name.to_ascii_lowercase().as_str() {
            // lmdir applies draft-behera policies (pwdPolicySubentry, password_policy_default)
            // without an overlay; the flags are judged at the end.
            "ppolicy" => {
                self.ppolicy.overlay = Some(directive);
                return;
            }
            "syncprov" => {
                self.draft.replication.provider = true;
                return;
            }
            // Translated by their directives into [integrity].
            "refint" | "unique" | "dynlist" => return,
            _ => {}
        }
        if name.eq_ignore_ascii_case("memberof") {
            self.draft.memberof = true;
            self.note(
                directive,
                NoteKind::Approximated,
                "lmdir maintains memberOf itself ([database] memberof) for groupOfNames/member and \
                 groupOfUniqueNames/uniqueMember; memberof-* options are not read",
            );
            return;
        }
        self.note(
            directive,
            NoteKind::NotTranslated,
            format!("lmdir has no {name} overlay"),
        );
    }

    /// `limits <who> <limit>...` → a `[[limits]]` rule, with what does not map noted.
    fn limits_rule(&mut self, directive: &Directive) {
        let Some((who_text, words)) = directive.arguments().split_first() else {
            self.limit_lost(directive, "limits needs a who");
            return;
        };
        let who = match limits_who(who_text) {
            Ok(who) => who,
            Err(reason) => {
                self.limit_lost(directive, reason);
                return;
            }
        };
        let (rule, lost, narrowed) = limits_rule_words(who, words);
        if !lost.is_empty() {
            self.limit_lost(directive, lost.join("; "));
        }
        if !narrowed.is_empty() {
            self.note(directive, NoteKind::Approximated, narrowed.join("; "));
        }
        if rule.keyed_limits().iter().any(|(_, limit)| limit.is_some()) {
            self.draft.limits.push(rule);
        } else if lost.is_empty() {
            self.limit_lost(directive, "no limit given");
        }
    }

    /// `sizelimit {N|unlimited}` or `sizelimit size[.soft|.hard|.unchecked]=N ...` (and the
    /// same for `timelimit time...`).
    fn parse_limits(&mut self, directive: &Directive) -> Option<Limits> {
        let prefix = if directive.keyword() == "sizelimit" {
            "size"
        } else {
            "time"
        };
        match parse_limit_words(directive.arguments(), prefix) {
            Ok((limits, ignored)) => {
                if !ignored.is_empty() {
                    self.limit_lost(
                        directive,
                        format!("{} have no lmdir counterpart", ignored.join(" ")),
                    );
                }
                Some(limits)
            }
            Err(reason) => {
                self.limit_lost(directive, reason);
                None
            }
        }
    }

    fn index(&mut self, directive: &Directive) {
        let arguments = directive.arguments();
        let Some(attributes) = arguments.first() else {
            self.note(
                directive,
                NoteKind::NotTranslated,
                "index needs an attribute list",
            );
            return;
        };
        // A kinds list continued on the next line arrives as several words.
        let kinds = match arguments.get(1..).filter(|rest| !rest.is_empty()) {
            Some(kinds) => match parse_index_kinds(&kinds.join(",")) {
                Ok((kinds, ignored)) => {
                    if !ignored.is_empty() {
                        self.note(
                            directive,
                            NoteKind::Approximated,
                            format!("index options {} are not used by lmdir", ignored.join(",")),
                        );
                    }
                    kinds
                }
                Err(reason) => {
                    self.note(directive, NoteKind::NotTranslated, reason);
                    return;
                }
            },
            None => self.index_default.clone(),
        };
        if attributes.eq_ignore_ascii_case("default") {
            self.index_default = kinds;
            return;
        }
        if kinds.is_empty() {
            self.note(
                directive,
                NoteKind::NotTranslated,
                "no index kinds given and no `index default`",
            );
            return;
        }
        for attribute in attributes
            .split(',')
            .map(str::trim)
            .filter(|name| !name.is_empty())
        {
            let entry = self
                .indexes
                .entry(attribute.to_ascii_lowercase())
                .or_insert_with(|| (attribute.to_string(), Vec::new()));
            for kind in &kinds {
                if !entry.1.contains(kind) {
                    entry.1.push(*kind);
                }
            }
        }
    }

    fn finish(
        mut self,
        parsed: &Parsed,
        options: &MigrateOptions,
    ) -> Result<Migration, MigrateError> {
        // slapd's limits are written out even where slapd was left at its default (on every
        // route: slapd.conf leaves them out, cn=config may write them), so the migrated server
        // limits searches as slapd did; `defaults_note` says so once.
        self.draft.size_limit = Some(
            pick_limit(
                (self.database.size, self.global.size),
                "sizelimit",
                SLAPD_SIZE_LIMIT,
                &mut self.notes,
            )
            .unwrap_or(SLAPD_SIZE_LIMIT),
        );
        self.draft.time_limit_seconds = Some(
            pick_limit(
                (self.database.time, self.global.time),
                "timelimit",
                SLAPD_TIME_LIMIT_SECONDS,
                &mut self.notes,
            )
            .unwrap_or(SLAPD_TIME_LIMIT_SECONDS),
        );
        self.draft.lookthrough_limit = self.database.size.unchecked.or(self.global.size.unchecked);
        self.finish_tls();
        self.finish_ppolicy();
        self.finish_replication();
        self.notes
            .push(defaults_note(self.ppolicy.hash_cleartext.is_some()));
        for (_, (name, mut kinds)) in std::mem::take(&mut self.indexes) {
            kinds.sort();
            self.draft.index.push((name, kinds));
        }
        self.finish_access();
        if !self.access_widening.is_empty() && !options.accept_untranslated_access {
            return Err(access_refusal(&self.access_widening));
        }
        if !self.limits_lost.is_empty() && !options.accept_untranslated_limits {
            return Err(limits_refusal(&self.limits_lost));
        }
        let schema_files = self.finish_schema(parsed, options);
        self.draft.listen = options.listen.clone();
        self.draft.directory = options.database_directory.clone();
        let config_text = emit(&self.draft, &self.notes);
        Ok(Migration {
            config_text,
            schema_files,
            notes: self.notes,
        })
    }

    fn finish_tls(&mut self) {
        match (self.tls_certificate.take(), self.tls_key.take()) {
            (Some((_, certificate)), Some((_, key))) => {
                self.draft.tls_certificate = Some(certificate);
                self.draft.tls_key = Some(key);
            }
            (Some((directive, _)), None) | (None, Some((directive, _))) => self.note(
                directive,
                NoteKind::NotTranslated,
                "lmdir needs both TLSCertificateFile and TLSCertificateKeyFile",
            ),
            (None, None) => {}
        }
    }

    fn finish_access(&mut self) {
        let suffix = self.draft.suffix.clone().unwrap_or_default();
        let translation = translate_access(&self.access, &self.global_access, &suffix);
        self.notes.extend(translation.notes);
        self.access_widening = translation.widening;
        if self.access.is_empty() && self.global_access.is_empty() {
            self.notes.push(Note {
                location: Location {
                    file: "(no access directives)".to_string(),
                    line: 0,
                },
                directive: "access to * by * read (slapd's default)".to_string(),
                kind: NoteKind::Approximated,
                reason: "slapd lets everyone read everything, userPassword included; lmdir's \
                         built-in policy is kept instead (userPassword only for binds and its own \
                         entry's writes)"
                    .to_string(),
            });
            return;
        }
        self.draft.access = translation.rules;
        if self.draft.access.is_empty() {
            // Rules existed but none applies to the database: slapd's implicit final
            // `access to * by * none` is all that is left.
            self.draft.access.push(AccessRule {
                to: AccessTarget::default(),
                by: vec![AccessClause {
                    who: Who::Anyone,
                    access: AccessLevel::None,
                }],
            });
        }
    }

    fn finish_schema(&mut self, parsed: &Parsed, options: &MigrateOptions) -> Vec<SchemaFile> {
        let mut files: Vec<SchemaFile> = Vec::new();
        for source in &parsed.schema {
            match source {
                SchemaSource::Existing(path) => {
                    let path = std::path::absolute(path).unwrap_or_else(|_| path.clone());
                    self.draft.schema_files.push(path.display().to_string());
                }
                SchemaSource::Written { name, text } => {
                    let mut file_name = format!("{}.schema", safe_file_name(name));
                    let mut counter = 1;
                    while files.iter().any(|file| file.file_name == file_name) {
                        counter += 1;
                        file_name = format!("{}-{counter}.schema", safe_file_name(name));
                    }
                    let path = options.schema_directory.join(&file_name);
                    let path = std::path::absolute(&path).unwrap_or(path);
                    self.draft.schema_files.push(path.display().to_string());
                    files.push(SchemaFile {
                        file_name,
                        text: text.clone(),
                    });
                }
            }
        }
        files
    }
}

/// The error for access rules that cannot be left out without lmdir granting more than slapd:
/// each named with its place, its text and why.
fn access_refusal(widening: &[Note]) -> MigrateError {
    let heading = format!(
        "{} access rule(s) or clause(s) cannot be translated, and leaving them out would let \
         lmdir grant more than slapd did:",
        widening.len()
    );
    refusal(heading, widening, "--accept-untranslated-access")
}

fn limits_refusal(lost: &[Note]) -> MigrateError {
    let heading = format!(
        "{} limit directive(s) cannot be translated in full, and leaving them out would put \
         lmdir's defaults where slapd had the site's own limits:",
        lost.len()
    );
    refusal(heading, lost, "--accept-untranslated-limits")
}

/// A refused migration: the heading, each directive left out with its place and why, and the
/// flag that writes the config without them.
fn refusal(heading: String, notes: &[Note], flag: &str) -> MigrateError {
    let mut message = heading;
    for note in notes {
        message += &format!(
            "\n  {}: {}: {}",
            note.location,
            note.directive.replace('\n', " "),
            note.reason
        );
    }
    message += &format!(
        "\nRewrite them in forms lmdir translates (crates/migrate/README.md), or pass {flag} to \
         write the config without them (each stays listed as NOT TRANSLATED in the report)."
    );
    MigrateError::new(None, message)
}

/// A schema name as a file name: letters, digits, `-`, `_`, `.`.
fn safe_file_name(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|character| {
            if character.is_ascii_alphanumeric() || matches!(character, '-' | '_' | '.') {
                character
            } else {
                '_'
            }
        })
        .collect();
    let cleaned = cleaned.trim_start_matches('.').to_string();
    if cleaned.is_empty() {
        "schema".to_string()
    } else {
        cleaned
    }
}

/// The database's limit when it set one, else the global one. lmdir has one limit: the soft one
/// (what a client asking for no limit gets); a different hard limit is noted.
/// A hard limit alone leaves slapd's soft limit at its default (`slapd_default`), or at the
/// hard one when that is lower.
fn pick_limit(
    (database, global): (Limits, Limits),
    name: &str,
    slapd_default: u64,
    notes: &mut Vec<Note>,
) -> Option<u64> {
    let chosen = if database.soft.is_some() || database.hard.is_some() {
        database
    } else {
        global
    };
    let soft = match (chosen.soft, chosen.hard) {
        (Some(soft), _) => soft,
        (None, Some(0)) => slapd_default,
        (None, Some(hard)) => hard.min(slapd_default),
        (None, None) => return None,
    };
    if let Some(hard) = chosen.hard {
        if hard != soft {
            notes.push(Note {
                location: Location {
                    file: "(limits)".to_string(),
                    line: 0,
                },
                directive: format!("{name} soft={soft} hard={hard}"),
                kind: NoteKind::Approximated,
                reason: "lmdir has one limit: the soft one is used, clients cannot ask up to the hard one"
                    .to_string(),
            });
        }
    }
    Some(soft)
}

/// A `limits` selector as a `[[limits]]` who: `*`, `anonymous`, `users`, `dn[.exact|.base]=`,
/// `dn.subtree=`, `dn.onelevel=`, `dn.children=`, `group[/<objectClass>[/<attribute>]]=` (as
/// slapd: groupOfNames and member unless named).
fn limits_who(text: &str) -> Result<lmdir_config::Who, String> {
    use lmdir_config::Who;
    match text.to_ascii_lowercase().as_str() {
        "*" => return Ok(Who::Anyone),
        "anonymous" => return Ok(Who::Anonymous),
        "users" => return Ok(Who::Users),
        _ => {}
    }
    let unsupported = || {
        format!(
            "selector {text:?} has no lmdir counterpart (*, anonymous, users, dn.exact=, \
             dn.subtree=, dn.onelevel=, dn.children=, group[/class/attribute]= are translated)"
        )
    };
    let (kind, pattern) = text.split_once('=').ok_or_else(unsupported)?;
    let dn = pattern.trim().trim_matches('"').to_string();
    if kind.to_ascii_lowercase().starts_with("group") {
        return crate::access::group_who(kind, &dn);
    }
    match kind.to_ascii_lowercase().as_str() {
        "dn" | "dn.exact" | "dn.base" => Ok(Who::Dn(dn)),
        "dn.subtree" => Ok(Who::DnSubtree(dn)),
        "dn.one" | "dn.onelevel" => Ok(Who::DnOne(dn)),
        "dn.children" => Ok(Who::DnChildren(dn)),
        _ => Err(unsupported()),
    }
}

/// A limit as slapd writes it.
fn limit_text(limit: lmdir_config::Limit) -> String {
    match limit {
        lmdir_config::Limit::Unlimited => "unlimited".to_string(),
        lmdir_config::Limit::Count(count) => count.to_string(),
    }
}

/// The limit words of a `limits` line as a rule for `who`, why each word left out was, and
/// where the rule is narrower than slapd's (a hard limit above the soft one).
fn limits_rule_words(
    who: lmdir_config::Who,
    words: &[String],
) -> (lmdir_config::LimitsRule, Vec<String>, Vec<String>) {
    use lmdir_config::Limit;
    let mut rule = lmdir_config::LimitsRule {
        who,
        size: None,
        time_seconds: None,
        lookthrough: None,
        paged_total: None,
        page_size: None,
    };
    let mut lost = Vec::new();
    let mut narrowed = Vec::new();
    let limit = |text: &str| match text.to_ascii_lowercase().as_str() {
        "unlimited" | "none" => Some(Limit::Unlimited),
        number => number
            .parse()
            .ok()
            .filter(|&count| count > 0)
            .map(Limit::Count),
    };
    // lmdir has one size and one time limit, the soft one (what a client asking for no limit
    // gets): a hard limit stands in only where no soft one is given.
    let (mut size_hard, mut time_hard) = (None, None);
    for word in words {
        let Some((name, value)) = word.split_once('=') else {
            lost.push(format!("{word:?} is not <limit>=<value>"));
            continue;
        };
        let slot = match name.to_ascii_lowercase().as_str() {
            "size" | "size.soft" => &mut rule.size,
            "size.hard" => &mut size_hard,
            "time" | "time.soft" => &mut rule.time_seconds,
            "time.hard" => &mut time_hard,
            "size.unchecked" => &mut rule.lookthrough,
            "size.prtotal" => &mut rule.paged_total,
            "size.pr" => &mut rule.page_size,
            _ => {
                lost.push(format!("{word} has no lmdir counterpart"));
                continue;
            }
        };
        match limit(value) {
            Some(value) => *slot = Some(value),
            None => lost.push(format!(
                "{word}: lmdir limits are a positive number or unlimited"
            )),
        }
    }
    for (name, soft, hard) in [
        ("size", &mut rule.size, size_hard),
        ("time", &mut rule.time_seconds, time_hard),
    ] {
        match (*soft, hard) {
            (None, Some(hard)) => *soft = Some(hard),
            (Some(kept), Some(hard)) if kept != hard => narrowed.push(format!(
                "{name}.hard={}: lmdir has one limit, the soft one ({name}.soft={}) is kept, and \
                 clients cannot ask for more up to the hard one",
                limit_text(hard),
                limit_text(kept)
            )),
            _ => {}
        }
    }
    (rule, lost, narrowed)
}

/// Parses limit words; returns the limits and the words that have no lmdir counterpart.
fn parse_limit_words(words: &[String], prefix: &str) -> Result<(Limits, Vec<String>), String> {
    let mut limits = Limits::default();
    let mut ignored = Vec::new();
    let value = |text: &str| -> Result<u64, String> {
        match text.to_ascii_lowercase().as_str() {
            "unlimited" | "none" => Ok(0),
            number => number
                .parse()
                .map_err(|_| format!("{text:?} is not a number or `unlimited`")),
        }
    };
    if let [single] = words {
        if !single.contains('=') {
            let limit = value(single)?;
            limits.soft = Some(limit);
            limits.hard = Some(limit);
            return Ok((limits, ignored));
        }
    }
    if words.is_empty() {
        return Err("a limit is needed".to_string());
    }
    for word in words {
        let Some((name, number)) = word.split_once('=') else {
            return Err(format!("{word:?} is not {prefix}[.soft|.hard]=N"));
        };
        let name = name.to_ascii_lowercase();
        let Some(kind) = name.strip_prefix(prefix) else {
            return Err(format!("{word:?} is not a {prefix} limit"));
        };
        match kind {
            "" => {
                limits.soft = Some(value(number)?);
                limits.hard = limits.soft;
            }
            ".soft" => limits.soft = Some(value(number)?),
            ".hard" => limits.hard = Some(value(number)?),
            ".unchecked" if prefix == "size" => limits.unchecked = Some(value(number)?),
            _ => ignored.push(word.clone()),
        }
    }
    Ok((limits, ignored))
}

/// `eq,sub,pres` → kinds, plus the options lmdir ignores (`nolang`, `nosubtypes`, `notags`).
fn parse_index_kinds(text: &str) -> Result<(Vec<IndexKind>, Vec<String>), String> {
    let mut kinds = Vec::new();
    let mut ignored = Vec::new();
    for word in text
        .split(',')
        .map(str::trim)
        .filter(|word| !word.is_empty())
    {
        if ["nolang", "nosubtypes", "notags"].contains(&word.to_ascii_lowercase().as_str()) {
            ignored.push(word.to_string());
            continue;
        }
        let kind =
            IndexKind::from_name(word).ok_or_else(|| format!("unknown index kind {word:?}"))?;
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    Ok((kinds, ignored))
}
