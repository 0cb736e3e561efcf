//! cn=config reading, from `slapcat -n0` output or a `slapd.d` directory (one LDIF file per entry,
//! CRC comment lines first, the entry's children in a directory named after it). Each entry
//! becomes slapd.conf-style directives: `olcDatabase: {1}mdb` → `database mdb`, `olcDbIndex: cn
//! eq` → `index cn eq`, `olcAccess: {0}to * by * read` → `access to * by * read`; `cn=schema`
//! entries become schema text with the `{N}` ordering prefixes removed.

use std::io::BufReader;
use std::path::Path;

use lmdir_ldif::{LdifReader, ParseOptions, RecordBody};

use crate::conf::split_words;
use crate::{Directive, Location, MigrateError, Note, NoteKind, Parsed, SchemaSource};
pub(crate) use lmdir_schema::strip_ordering_prefix;

/// Files read from a `slapd.d` tree before giving up (a real one has a few dozen).
const CONFIG_DIRECTORY_FILES_MAX: usize = 10_000;
/// Directory nesting followed in a `slapd.d` tree (cn=config → database → overlay is 3).
const CONFIG_DIRECTORY_DEPTH_MAX: usize = 8;

/// Attributes that describe the entry, not the configuration.
const ENTRY_BOOKKEEPING: &[&str] = &[
    "objectclass",
    "cn",
    "structuralobjectclass",
    "entryuuid",
    "creatorsname",
    "createtimestamp",
    "entrycsn",
    "modifiersname",
    "modifytimestamp",
    "olcdatabase",
    "olcoverlay",
];

/// Schema attributes and the schema-file keyword each becomes, in the order a file needs them
/// (OID macros before the definitions that use them, attribute types before classes).
const SCHEMA_ATTRIBUTES: &[(&str, &str)] = &[
    ("olcobjectidentifier", "objectidentifier"),
    ("olcldapsyntaxes", "ldapsyntax"),
    ("olcattributetypes", "attributetype"),
    ("olcobjectclasses", "objectclass"),
];

/// cn=config attributes whose value is a list of words, as the slapd.conf directive's arguments
/// are; every other value is one argument (a DN, a path, a password may hold spaces).
const WORD_LIST_KEYWORDS: &[&str] = &[
    "access",
    "index",
    "limits",
    "sizelimit",
    "timelimit",
    "checkpoint",
    "loglevel",
    "security",
    "require",
    "requires",
    "allow",
    "allows",
    "disallow",
    "disallows",
    "envflags",
    "syncrepl",
    "serverid",
];

pub(crate) fn parse_config_ldif(text: &str, source_name: &str) -> Result<Parsed, MigrateError> {
    let mut parsed = Parsed::default();
    add_ldif_entries(text, source_name, &mut parsed)?;
    Ok(parsed)
}

/// Reads a `slapd.d` directory: `cn=config.ldif`, then each entry file followed by the
/// directory of its children, children in their `{N}` order.
pub fn read_config_directory(directory: &Path) -> Result<Parsed, MigrateError> {
    let mut parsed = Parsed::default();
    let mut files_read = 0;
    read_directory_level(directory, 0, &mut files_read, &mut parsed)?;
    if parsed.directives.is_empty() && parsed.schema.is_empty() {
        return Err(MigrateError::new(
            None,
            format!("{}: no cn=config LDIF files found", directory.display()),
        ));
    }
    Ok(parsed)
}

fn read_directory_level(
    directory: &Path,
    depth: usize,
    files_read: &mut usize,
    parsed: &mut Parsed,
) -> Result<(), MigrateError> {
    if depth > CONFIG_DIRECTORY_DEPTH_MAX {
        return Err(MigrateError::new(
            None,
            format!(
                "{}: nested deeper than {CONFIG_DIRECTORY_DEPTH_MAX} levels",
                directory.display()
            ),
        ));
    }
    let listing = std::fs::read_dir(directory).map_err(|error| {
        MigrateError::new(
            None,
            format!("cannot list {}: {error}", directory.display()),
        )
    })?;
    let mut names: Vec<String> = listing
        .filter_map(|entry| entry.ok())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".ldif"))
        .collect();
    names.sort_by_key(|name| ordering_key(name));
    for name in names {
        *files_read += 1;
        if *files_read > CONFIG_DIRECTORY_FILES_MAX {
            return Err(MigrateError::new(
                None,
                format!("more than {CONFIG_DIRECTORY_FILES_MAX} files under the config directory"),
            ));
        }
        let path = directory.join(&name);
        let text = std::fs::read_to_string(&path).map_err(|error| {
            MigrateError::new(None, format!("cannot read {}: {error}", path.display()))
        })?;
        add_ldif_entries(&text, &path.display().to_string(), parsed)?;
        let children = directory.join(name.trim_end_matches(".ldif"));
        if children.is_dir() {
            read_directory_level(&children, depth + 1, files_read, parsed)?;
        }
    }
    Ok(())
}

/// `olcDatabase={10}mdb.ldif` sorts after `olcDatabase={2}mdb.ldif` and `{-1}` first.
fn ordering_key(name: &str) -> (String, i64, String) {
    let Some(open) = name.find('{') else {
        return (name.to_string(), 0, String::new());
    };
    let Some(close) = name[open..].find('}').map(|offset| open + offset) else {
        return (name.to_string(), 0, String::new());
    };
    match name[open + 1..close].parse::<i64>() {
        Ok(number) => (name[..open].to_string(), number, name[close..].to_string()),
        Err(_) => (name.to_string(), 0, String::new()),
    }
}

fn add_ldif_entries(
    text: &str,
    source_name: &str,
    parsed: &mut Parsed,
) -> Result<(), MigrateError> {
    let options = ParseOptions {
        // A configuration must not make the migration read other local files.
        allow_file_urls: false,
        ..ParseOptions::default()
    };
    let physical_lines: Vec<&str> = text.lines().collect();
    for record in LdifReader::with_options(BufReader::new(text.as_bytes()), options) {
        let record = record.map_err(|error| {
            MigrateError::new(
                Some(Location {
                    file: source_name.to_string(),
                    line: error.line,
                }),
                error.to_string(),
            )
        })?;
        let RecordBody::Content(mut attributes) = record.body else {
            return Err(MigrateError::new(
                Some(Location {
                    file: source_name.to_string(),
                    line: record.line,
                }),
                format!("{}: a change record, not a cn=config entry", record.dn),
            ));
        };
        let mut value_lines = attribute_lines(&physical_lines, record.line, attributes.len());
        order_values(&mut attributes, &mut value_lines).map_err(|message| {
            MigrateError::new(
                Some(Location {
                    file: source_name.to_string(),
                    line: record.line,
                }),
                format!("{}: {message}", record.dn),
            )
        })?;
        let entry = Entry {
            source_name,
            dn: &record.dn,
            line: record.line,
            attributes: &attributes,
            value_lines: &value_lines,
        };
        entry.add_to(parsed);
    }
    Ok(())
}

/// cn=config attributes whose values slapd keeps in the order of their `{n}` prefixes
/// (`X-ORDERED 'VALUES'`), whatever order a file lists them in: the first matching access or
/// limits rule decides, a schema definition must follow those it names.
const ORDERED_VALUES: &[&str] = &[
    "olcaccess",
    "olclimits",
    "olcsyncrepl",
    "olcauthzregexp",
    "olcauthidrewrite",
    "olcmoduleload",
    "olcplugin",
    "olcreplica",
    "olcobjectidentifier",
    "olcattributetypes",
    "olcobjectclasses",
    "olcditcontentrules",
    "olcldapsyntaxes",
];

/// Puts the values of each `ORDERED_VALUES` attribute in the order of their `{n}` prefixes, as
/// slapd does when it reads the entry (a stable sort: equal prefixes keep their order; values
/// without prefixes keep theirs), each keeping its line. slapd refuses an entry mixing values
/// with and without a prefix: so does this.
fn order_values(attributes: &mut [(String, Vec<u8>)], lines: &mut [u64]) -> Result<(), String> {
    for name in ORDERED_VALUES {
        let positions: Vec<usize> = (0..attributes.len())
            .filter(|index| attributes[*index].0.eq_ignore_ascii_case(name))
            .collect();
        let prefixes: Vec<Option<i64>> = positions
            .iter()
            .map(|index| ordering_prefix(&String::from_utf8_lossy(&attributes[*index].1)))
            .collect();
        if prefixes.iter().all(Option::is_none) {
            continue;
        }
        if prefixes.iter().any(Option::is_none) {
            let attribute = &attributes[positions[0]].0;
            return Err(format!(
                "{attribute} values with and without {{n}} ordering prefixes: slapd refuses \
                 such an entry (number them all, or none)"
            ));
        }
        let mut order: Vec<usize> = (0..positions.len()).collect();
        order.sort_by_key(|rank| prefixes[*rank]);
        let values: Vec<((String, Vec<u8>), u64)> = order
            .iter()
            .map(|rank| {
                let index = positions[*rank];
                (attributes[index].clone(), lines[index])
            })
            .collect();
        for (index, (value, line)) in positions.iter().zip(values) {
            attributes[*index] = value;
            lines[*index] = line;
        }
    }
    Ok(())
}

/// The `n` of a `{n}` ordering prefix.
fn ordering_prefix(value: &str) -> Option<i64> {
    let rest = value.strip_prefix('{')?;
    let stripped = strip_ordering_prefix(value);
    if stripped.len() == value.len() {
        return None;
    }
    rest[..rest.len() - stripped.len() - 1].parse().ok()
}

/// The physical line of each attribute value of the record whose `dn:` is on `dn_line`: values
/// are the record's non-comment lines that do not start with a space, in order.
fn attribute_lines(physical_lines: &[&str], dn_line: u64, count: usize) -> Vec<u64> {
    let start = dn_line as usize; // the line after the dn: line (lines are 1-based)
    let mut lines = Vec::with_capacity(count);
    for (offset, line) in physical_lines.iter().enumerate().skip(start) {
        if lines.len() == count || line.trim().is_empty() {
            break;
        }
        if line.starts_with(' ') || line.starts_with('#') {
            continue;
        }
        lines.push(offset as u64 + 1);
    }
    // A record the reader accepted has one line per value; pad defensively with the dn line.
    lines.resize(count, dn_line);
    lines
}

struct Entry<'a> {
    source_name: &'a str,
    dn: &'a str,
    line: u64,
    attributes: &'a [(String, Vec<u8>)],
    value_lines: &'a [u64],
}

impl Entry<'_> {
    fn values(&self, name: &str) -> impl Iterator<Item = (u64, String)> + '_ {
        let name = name.to_string();
        self.attributes
            .iter()
            .zip(self.value_lines)
            .filter(move |((attribute, _), _)| attribute.eq_ignore_ascii_case(&name))
            .map(|((_, value), line)| (*line, String::from_utf8_lossy(value).into_owned()))
    }

    fn location(&self, line: u64) -> Location {
        Location {
            file: self.source_name.to_string(),
            line,
        }
    }

    fn add_to(&self, parsed: &mut Parsed) {
        let is_schema = self.attributes.iter().any(|(name, _)| {
            SCHEMA_ATTRIBUTES
                .iter()
                .any(|(attribute, _)| name.eq_ignore_ascii_case(attribute))
        });
        let is_builtin_schema = self
            .values("cn")
            .next()
            .is_some_and(|(_, cn)| cn.eq_ignore_ascii_case("schema"));
        if is_schema && is_builtin_schema {
            // slapd's built-in schema (its config, monitor and syntax definitions): lmdir has
            // its own. Skipped without a note, as a slapd.conf never names it.
            return;
        }
        if is_schema {
            parsed.schema.push(self.schema_source());
            self.note_content_rules(parsed);
            return;
        }
        // A database or overlay entry opens its section, as the directive does in slapd.conf.
        for (opening, keyword) in [("olcDatabase", "database"), ("olcOverlay", "overlay")] {
            if let Some((line, value)) = self.values(opening).next() {
                let value = strip_ordering_prefix(&value).to_string();
                parsed.directives.push(Directive {
                    location: self.location(line),
                    text: format!("{opening}: {value} ({})", self.dn),
                    words: vec![keyword.to_string(), value],
                });
            }
        }
        for ((name, value), line) in self.attributes.iter().zip(self.value_lines) {
            let lower = name.to_ascii_lowercase();
            if ENTRY_BOOKKEEPING.contains(&lower.as_str()) {
                continue;
            }
            let value = String::from_utf8_lossy(value);
            parsed
                .directives
                .push(directive_of(name, &value, self.location(*line)));
        }
    }

    /// DIT content rules lmdir's schema does not have: each is listed, never dropped silently
    /// (the auxiliary classes and attributes a rule allows must then be named in the entries'
    /// object classes, or the load refuses those entries).
    fn note_content_rules(&self, parsed: &mut Parsed) {
        for (line, value) in self.values("olcDitContentRules") {
            parsed.notes.push(Note {
                location: self.location(line),
                directive: format!("olcDitContentRules: {value}"),
                kind: NoteKind::NotTranslated,
                reason: "lmdir has no DIT content rules: entries relying on the attributes or \
                         auxiliary classes this rule allows are refused by `lmdir load`"
                    .to_string(),
            });
        }
    }

    fn schema_source(&self) -> SchemaSource {
        let name = self
            .values("cn")
            .next()
            .map(|(_, cn)| strip_ordering_prefix(&cn).to_string())
            .unwrap_or_else(|| format!("schema-{}", self.line));
        let mut text = format!("# From {} ({}:{})\n", self.dn, self.source_name, self.line);
        for (attribute, keyword) in SCHEMA_ATTRIBUTES {
            for (_, value) in self.values(attribute) {
                text.push_str(&format!("{keyword} {}\n", strip_ordering_prefix(&value)));
            }
        }
        SchemaSource::Written { name, text }
    }
}

/// One cn=config attribute value as the slapd.conf directive it stands for.
fn directive_of(attribute: &str, value: &str, location: Location) -> Directive {
    let keyword = keyword_of(attribute);
    let argument = if keyword == "rootpw" {
        value
    } else {
        strip_ordering_prefix(value)
    };
    let mut words = vec![keyword.clone()];
    match split_words(argument) {
        Ok(split) if WORD_LIST_KEYWORDS.contains(&keyword.as_str()) => words.extend(split),
        _ => words.push(argument.to_string()),
    }
    Directive {
        location,
        text: format!("{attribute}: {value}"),
        words,
    }
}

/// The slapd.conf keyword of a cn=config attribute: `olcDbIndex` → `index`, `olcSuffix` →
/// `suffix`, `olcToolThreads` → `tool-threads`.
fn keyword_of(attribute: &str) -> String {
    let lower = attribute.to_ascii_lowercase();
    let name = lower.strip_prefix("olc").unwrap_or(&lower);
    let name = match name.strip_prefix("db") {
        // `olcDbIndex` is `index`, but `olcDbnosync` is slapd.conf's `dbnosync`.
        Some(rest) if rest != "nosync" => rest,
        _ => name,
    };
    match name {
        "toolthreads" => "tool-threads".to_string(),
        "passwordhash" => "password-hash".to_string(),
        "nosync" => "dbnosync".to_string(),
        // syncprov's attributes: `olcSpSessionlog` is `syncprov-sessionlog`.
        sp if sp.starts_with("sp") => format!("syncprov-{}", &sp[2..]),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const N0: &str =
        "dn: cn=config\nobjectClass: olcGlobal\ncn: config\nolcPidFile: /run/slapd.pid\n\n\
dn: cn={0}mini,cn=schema,cn=config\nobjectClass: olcSchemaConfig\ncn: {0}mini\n\
olcObjectIdentifier: {0}myOID 1.3.6.1.4.1.99999\n\
olcAttributeTypes: {0}( myOID:1 NAME 'mini' SYNTAX 1.3.6.1.4.1.1466.115.121.1.15\n  )\n\
olcObjectClasses: {0}( myOID:2 NAME 'miniObject' SUP top AUXILIARY MAY mini )\n\n\
dn: olcDatabase={1}mdb,cn=config\nobjectClass: olcDatabaseConfig\nolcDatabase: {1}mdb\n\
olcSuffix: dc=example,dc=com\n# a comment line\n\
olcAccess: {0}to attrs=userPassword by self write by anonymous auth by * none\n\
olcRootPW:: e1NTSEF9eHl6\nolcDbIndex: cn,uid eq\n";

    #[test]
    fn slapcat_n0_entries_become_directives_and_schema() {
        let parsed = parse_config_ldif(N0, "n0.ldif").unwrap();
        let texts: Vec<(u64, Vec<String>)> = parsed
            .directives
            .iter()
            .map(|directive| (directive.location.line, directive.words.clone()))
            .collect();
        let words = |list: &[&str]| list.iter().map(|word| word.to_string()).collect::<Vec<_>>();
        assert_eq!(
            texts,
            vec![
                (4, words(&["pidfile", "/run/slapd.pid"])),
                (16, words(&["database", "mdb"])),
                (17, words(&["suffix", "dc=example,dc=com"])),
                (
                    19,
                    words(&[
                        "access",
                        "to",
                        "attrs=userPassword",
                        "by",
                        "self",
                        "write",
                        "by",
                        "anonymous",
                        "auth",
                        "by",
                        "*",
                        "none"
                    ])
                ),
                (20, words(&["rootpw", "{SSHA}xyz"])),
                (21, words(&["index", "cn,uid", "eq"])),
            ]
        );
        let [SchemaSource::Written { name, text }] = parsed.schema.as_slice() else {
            panic!("one schema expected: {:?}", parsed.schema);
        };
        assert_eq!(name, "mini");
        assert!(text.contains("objectidentifier myOID 1.3.6.1.4.1.99999\n"));
        assert!(text.contains(
            "attributetype ( myOID:1 NAME 'mini' SYNTAX 1.3.6.1.4.1.1466.115.121.1.15 )\n"
        ));
        assert!(text.contains("objectclass ( myOID:2 NAME 'miniObject'"));
    }

    /// slapd reads X-ORDERED values in their `{n}` order: `{1}to * by * read` listed before
    /// `{0}to attrs=userPassword ... by * none` still comes second. Kept in file order, the
    /// migrated rules let everyone read every password.
    #[test]
    fn ordered_values_follow_their_prefixes() {
        let ldif = "dn: olcDatabase={1}mdb,cn=config\nobjectClass: olcMdbConfig\n\
olcDatabase: {1}mdb\nolcSuffix: dc=x\n\
olcAccess: {2}to * by * read\n\
olcAccess: {0}to attrs=userPassword by self write by * auth\n\
olcLimits: {1}users size=10\n\
olcAccess: {1}to\n  attrs=mail by * none\n\
olcLimits: {0}anonymous size=5\n\
olcDbIndex: cn eq\n";
        let parsed = parse_config_ldif(ldif, "n0.ldif").unwrap();
        let texts: Vec<(u64, String)> = parsed
            .directives
            .iter()
            .map(|directive| (directive.location.line, directive.words[..2].join(" ")))
            .collect();
        // Each attribute's values fill the places its values had, in prefix order.
        let expected = [
            (3, "database mdb"),
            (4, "suffix dc=x"),
            (6, "access to"),
            (8, "access to"),
            (10, "limits anonymous"),
            (5, "access to"),
            (7, "limits users"),
            (11, "index cn"),
        ];
        let expected: Vec<(u64, String)> = expected
            .iter()
            .map(|(line, text)| (*line, text.to_string()))
            .collect();
        assert_eq!(texts, expected);
        assert_eq!(parsed.directives[2].words[2], "attrs=userPassword");
        assert_eq!(parsed.directives[3].words[2], "attrs=mail");
        assert_eq!(parsed.directives[5].words[2], "*");

        let mixed = "dn: olcDatabase={1}mdb,cn=config\nolcDatabase: {1}mdb\n\
olcAccess: {0}to * by * read\nolcAccess: to attrs=cn by * none\n";
        let error = parse_config_ldif(mixed, "n0.ldif").unwrap_err();
        assert!(error.message.contains("with and without"), "{error}");
        assert_eq!(error.location.unwrap().line, 1);
        // No prefixes at all: the file's order, as slapd.
        let plain = "dn: olcDatabase={1}mdb,cn=config\nolcDatabase: {1}mdb\n\
olcAccess: to attrs=cn by * none\nolcAccess: to * by * read\n";
        let parsed = parse_config_ldif(plain, "n0.ldif").unwrap();
        assert_eq!(parsed.directives[1].words[2], "attrs=cn");
        assert_eq!(ordering_prefix("{-1}frontend"), Some(-1));
        assert_eq!(ordering_prefix("{12}to *"), Some(12));
        assert_eq!(ordering_prefix("{SSHA}x"), None);
        assert_eq!(ordering_prefix("to *"), None);
    }

    #[test]
    fn ordering_prefixes_and_file_order() {
        assert_eq!(
            strip_ordering_prefix("{12}to * by * read"),
            "to * by * read"
        );
        assert_eq!(strip_ordering_prefix("{-1}frontend"), "frontend");
        assert_eq!(strip_ordering_prefix("{SSHA}abc"), "{SSHA}abc");
        let mut names = vec![
            "olcDatabase={10}mdb.ldif",
            "olcDatabase={2}mdb.ldif",
            "olcDatabase={-1}frontend.ldif",
            "cn=schema.ldif",
        ];
        names.sort_by_key(|name| ordering_key(name));
        assert_eq!(
            names,
            vec![
                "cn=schema.ldif",
                "olcDatabase={-1}frontend.ldif",
                "olcDatabase={2}mdb.ldif",
                "olcDatabase={10}mdb.ldif"
            ]
        );
        assert_eq!(keyword_of("olcDbIndex"), "index");
        assert_eq!(keyword_of("olcDbNoSync"), "dbnosync");
        assert_eq!(keyword_of("olcTLSCertificateFile"), "tlscertificatefile");
    }
}
