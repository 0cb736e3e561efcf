//! lmdir-migrate: translates an OpenLDAP configuration (a `slapd.conf`, a `slapcat -n0` LDIF of
//! cn=config, or a cn=config directory `slapd.d`) into an lmdir TOML config, plus the `.schema`
//! files that cn=config holds as entries.
//!
//! Every source is first turned into one list of slapd.conf-style directives (`conf` for
//! slapd.conf, `cn_config` for cn=config), so one translator (`translate`) handles both. Nothing
//! is dropped silently: every directive that is not translated, or translated with a difference,
//! comes back as a [`Note`] naming its file, line and reason.

mod access;
mod cn_config;
mod conf;
mod emit;
mod server_entries;
mod translate;

use std::fmt;
use std::path::{Path, PathBuf};

pub use cn_config::read_config_directory;

/// Where a directive came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub file: String,
    /// 1-based line of the directive (the first physical line of a continued one).
    pub line: u64,
}

impl fmt::Display for Location {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}:{}", self.file, self.line)
    }
}

/// One configuration directive in slapd.conf form: its keyword first, then its arguments with
/// quotes removed. cn=config attributes become the same form (`olcDbIndex: cn eq` →
/// `index cn eq`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Directive {
    pub location: Location,
    pub words: Vec<String>,
    /// The directive as written, for reports and for schema statements.
    pub text: String,
}

impl Directive {
    /// The keyword, lowercased and without `-` and `_` (slapd keywords are case-insensitive,
    /// and cn=config's names drop the separators: `sockbuf_max_incoming` is
    /// `olcSockbufMaxIncoming`, `ppolicy_default` is `olcPPolicyDefault`).
    pub fn keyword(&self) -> String {
        self.words
            .first()
            .map(|word| canonical(word))
            .unwrap_or_default()
    }

    pub fn arguments(&self) -> &[String] {
        self.words.get(1..).unwrap_or(&[])
    }
}

/// A keyword or option word as compared: lowercase, `-` and `_` removed.
pub(crate) fn canonical(word: &str) -> String {
    word.chars()
        .filter(|character| !matches!(character, '-' | '_'))
        .map(|character| character.to_ascii_lowercase())
        .collect()
}

/// Where the definitions of one schema come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SchemaSource {
    /// An `include`d `.schema` file: lmdir reads it as it is.
    Existing(PathBuf),
    /// Definitions held in the configuration itself (a cn=config `cn=schema` entry, or
    /// `attributetype` / `objectclass` lines in slapd.conf): written out as `<name>.schema`.
    Written { name: String, text: String },
}

/// A configuration read into directives, before translation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parsed {
    pub directives: Vec<Directive>,
    pub schema: Vec<SchemaSource>,
    /// What reading already decided needs no translation.
    pub notes: Vec<Note>,
}

/// How a directive was handled when it could not be translated one to one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum NoteKind {
    /// lmdir needs no counterpart (a module load, a pid file, LMDB sizing).
    NotNeeded,
    /// Translated, but lmdir's meaning differs in the way the reason says.
    Approximated,
    /// Not translated: its meaning is lost unless the administrator acts.
    NotTranslated,
}

impl NoteKind {
    pub fn word(self) -> &'static str {
        match self {
            NoteKind::NotNeeded => "not needed",
            NoteKind::Approximated => "approximated",
            NoteKind::NotTranslated => "NOT TRANSLATED",
        }
    }
}

/// One directive that was not translated one to one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    pub location: Location,
    pub directive: String,
    pub kind: NoteKind,
    pub reason: String,
}

impl fmt::Display for Note {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            formatter,
            "{}: {}: {}: {}",
            self.location,
            self.kind.word(),
            self.directive,
            self.reason
        )
    }
}

/// The notes as a short report: each directive not translated or approximated on its own line
/// (those first), the not-needed ones one line per reason with their count.
pub fn report(notes: &[Note]) -> Vec<String> {
    let mut lines = Vec::new();
    for kind in [NoteKind::NotTranslated, NoteKind::Approximated] {
        lines.extend(
            notes
                .iter()
                .filter(|note| note.kind == kind)
                .map(|note| note.to_string().replace('\n', " ")),
        );
    }
    let mut reasons: Vec<(&str, usize)> = Vec::new();
    for note in notes.iter().filter(|note| note.kind == NoteKind::NotNeeded) {
        match reasons
            .iter_mut()
            .find(|(reason, _)| *reason == note.reason)
        {
            Some((_, count)) => *count += 1,
            None => reasons.push((&note.reason, 1)),
        }
    }
    reasons.sort();
    for (reason, count) in reasons {
        lines.push(format!("not needed ({count}): {reason}"));
    }
    lines
}

/// What the caller decides that the OpenLDAP configuration does not say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrateOptions {
    /// The directory the written `.schema` files go to (their paths in the config are made
    /// absolute from it).
    pub schema_directory: PathBuf,
    /// lmdir's LMDB directory (never slapd's: the formats differ); `None` = lmdir's default.
    pub database_directory: Option<PathBuf>,
    /// Listener URLs (slapd takes them from `-h` on its command line); empty = lmdir's default.
    pub listen: Vec<String>,
    /// Translate even when an access rule, or a clause whose requesters a later clause or rule
    /// grants more, has to be left out: lmdir may then grant more than slapd did. Off, such a
    /// configuration is refused with an error naming each of them (`lmdir migrate
    /// --accept-untranslated-access` turns it on).
    pub accept_untranslated_access: bool,
    /// Translate even when a `limits`, `sizelimit` or `timelimit` directive (or part of one)
    /// has no lmdir counterpart: lmdir's defaults then stand in for it. Off, such a configuration
    /// is refused with an error naming each (`lmdir migrate --accept-untranslated-limits`).
    pub accept_untranslated_limits: bool,
}

/// A schema file to write beside the config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaFile {
    /// The file name, inside `MigrateOptions::schema_directory`.
    pub file_name: String,
    pub text: String,
}

/// The translated configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Migration {
    /// The lmdir TOML config (ending with a comment block listing every note).
    pub config_text: String,
    pub schema_files: Vec<SchemaFile>,
    pub notes: Vec<Note>,
}

/// Why a configuration could not be migrated at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrateError {
    pub location: Option<Location>,
    pub message: String,
}

impl MigrateError {
    pub fn new(location: Option<Location>, message: impl Into<String>) -> MigrateError {
        MigrateError {
            location,
            message: message.into(),
        }
    }
}

impl fmt::Display for MigrateError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.location {
            Some(location) => write!(formatter, "{location}: {}", self.message),
            None => formatter.write_str(&self.message),
        }
    }
}

impl std::error::Error for MigrateError {}

/// The kinds of OpenLDAP configuration `migrate_path` recognizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    SlapdConf,
    /// `slapcat -n0` output.
    ConfigLdif,
    /// A `slapd.d` directory.
    ConfigDirectory,
}

/// Tells a slapd.conf from a cn=config LDIF (its first record starts with `dn:`) or directory.
pub fn detect_source_kind(path: &Path) -> Result<SourceKind, MigrateError> {
    if path.is_dir() {
        return Ok(SourceKind::ConfigDirectory);
    }
    let text = read_text(path)?;
    let first = text
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty() && !line.starts_with('#'));
    let is_ldif = first.is_some_and(|line| {
        let lower = line.to_ascii_lowercase();
        lower.starts_with("dn:") || lower.starts_with("version:")
    });
    Ok(if is_ldif {
        SourceKind::ConfigLdif
    } else {
        SourceKind::SlapdConf
    })
}

/// Reads a configuration of any recognized kind and translates it.
pub fn migrate_path(path: &Path, options: &MigrateOptions) -> Result<Migration, MigrateError> {
    let source_name = path.display().to_string();
    let kind = detect_source_kind(path)?;
    if kind != SourceKind::ConfigDirectory && !has_content(&read_text(path)?) {
        return Err(MigrateError::new(
            None,
            format!(
                "{source_name} is empty: nothing to migrate (on a system configured by \
                 slapd.conf, `slapcat -n0` writes nothing: migrate the slapd.conf itself)"
            ),
        ));
    }
    let parsed = match kind {
        SourceKind::ConfigDirectory => read_config_directory(path)?,
        SourceKind::ConfigLdif => cn_config::parse_config_ldif(&read_text(path)?, &source_name)?,
        SourceKind::SlapdConf => {
            conf::parse_slapd_conf(&read_text(path)?, &source_name, &|path| {
                std::fs::read_to_string(path)
            })?
        }
    };
    translate::translate(&parsed, options)
}

/// Translates slapd.conf text; `read_include` reads `include`d files.
pub fn migrate_slapd_conf(
    text: &str,
    source_name: &str,
    read_include: &dyn Fn(&Path) -> std::io::Result<String>,
    options: &MigrateOptions,
) -> Result<Migration, MigrateError> {
    let parsed = conf::parse_slapd_conf(text, source_name, read_include)?;
    translate::translate(&parsed, options)
}

/// Translates a `slapcat -n0` LDIF of cn=config.
pub fn migrate_config_ldif(
    text: &str,
    source_name: &str,
    options: &MigrateOptions,
) -> Result<Migration, MigrateError> {
    let parsed = cn_config::parse_config_ldif(text, source_name)?;
    translate::translate(&parsed, options)
}

/// Whether a configuration text holds anything but blank and comment lines.
fn has_content(text: &str) -> bool {
    text.lines()
        .map(str::trim)
        .any(|line| !line.is_empty() && !line.starts_with('#'))
}

fn read_text(path: &Path) -> Result<String, MigrateError> {
    std::fs::read_to_string(path).map_err(|error| {
        MigrateError::new(None, format!("cannot read {}: {error}", path.display()))
    })
}
