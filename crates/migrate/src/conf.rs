//! slapd.conf reading: logical lines (a line starting with whitespace continues the previous
//! one; `#` at the start of a line is a comment), words split on whitespace with `"` quoting,
//! and `include` followed in place. An included file holding only schema statements stays a
//! file lmdir reads itself; `attributetype` / `objectclass` / `objectidentifier` lines written in
//! the configuration are gathered into schema text to write out.

use std::path::{Path, PathBuf};

use crate::{Directive, Location, MigrateError, Parsed, SchemaSource};

/// Nested `include`s followed before giving up (a file including itself would never end).
const INCLUDE_DEPTH_MAX: usize = 16;

/// Keywords of schema statements.
pub(crate) const SCHEMA_KEYWORDS: &[&str] = &["attributetype", "objectclass", "objectidentifier"];

pub(crate) fn parse_slapd_conf(
    text: &str,
    source_name: &str,
    read_include: &dyn Fn(&Path) -> std::io::Result<String>,
) -> Result<Parsed, MigrateError> {
    let mut parsed = Parsed::default();
    let mut reader = Reader {
        read_include,
        parsed: &mut parsed,
        inline_schema_count: 0,
    };
    reader.read(text, source_name, 0)?;
    Ok(parsed)
}

struct Reader<'a> {
    read_include: &'a dyn Fn(&Path) -> std::io::Result<String>,
    parsed: &'a mut Parsed,
    inline_schema_count: usize,
}

impl Reader<'_> {
    fn read(&mut self, text: &str, source_name: &str, depth: usize) -> Result<(), MigrateError> {
        for (line, logical) in logical_lines(text) {
            let location = Location {
                file: source_name.to_string(),
                line,
            };
            let words = split_words(&logical)
                .map_err(|message| MigrateError::new(Some(location.clone()), message))?;
            let directive = Directive {
                location,
                words,
                text: logical,
            };
            let keyword = directive.keyword();
            if keyword == "include" {
                self.include(&directive, source_name, depth)?;
            } else if SCHEMA_KEYWORDS.contains(&keyword.as_str()) {
                self.add_inline_schema(&directive.text);
            } else {
                self.parsed.directives.push(directive);
            }
        }
        Ok(())
    }

    fn include(
        &mut self,
        directive: &Directive,
        source_name: &str,
        depth: usize,
    ) -> Result<(), MigrateError> {
        let location = Some(directive.location.clone());
        let [path] = directive.arguments() else {
            return Err(MigrateError::new(location, "include needs one file name"));
        };
        if depth >= INCLUDE_DEPTH_MAX {
            return Err(MigrateError::new(
                location,
                format!("includes nested deeper than {INCLUDE_DEPTH_MAX} (a loop?)"),
            ));
        }
        let path = resolve_include(Path::new(path), source_name);
        let text = (self.read_include)(&path).map_err(|error| {
            MigrateError::new(
                location.clone(),
                format!("cannot read {}: {error}", path.display()),
            )
        })?;
        if is_schema_only(&text) {
            self.parsed.schema.push(SchemaSource::Existing(path));
            return Ok(());
        }
        self.read(&text, &path.display().to_string(), depth + 1)
    }

    fn add_inline_schema(&mut self, statement: &str) {
        if let Some(SchemaSource::Written { text, .. }) = self.parsed.schema.last_mut() {
            text.push_str(statement);
            text.push('\n');
            return;
        }
        self.inline_schema_count += 1;
        self.parsed.schema.push(SchemaSource::Written {
            name: format!("slapd-conf-{}", self.inline_schema_count),
            text: format!("{statement}\n"),
        });
    }
}

/// slapd resolves a relative include against its working directory; a migration runs elsewhere,
/// so a relative path that does not exist there is tried beside the including file.
fn resolve_include(path: &Path, source_name: &str) -> PathBuf {
    if path.is_absolute() || path.exists() {
        return path.to_path_buf();
    }
    match Path::new(source_name).parent() {
        Some(directory) => directory.join(path),
        None => path.to_path_buf(),
    }
}

/// Whether a file holds schema statements and nothing else (comments and blank lines aside).
fn is_schema_only(text: &str) -> bool {
    let mut any = false;
    for (_, logical) in logical_lines(text) {
        let keyword = logical
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        if !SCHEMA_KEYWORDS.contains(&keyword.as_str()) {
            return false;
        }
        any = true;
    }
    any
}

/// The logical lines of slapd.conf text with the number of each one's first physical line, as
/// slapd joins them: a line starting with whitespace continues the previous one (joined with one
/// space), so does the line after one ending in a single `\` (joined directly); a blank line ends
/// a logical line; a logical line starting with `#` (continuations included) is a comment.
pub(crate) fn logical_lines(text: &str) -> Vec<(u64, String)> {
    let mut lines: Vec<(u64, String)> = Vec::new();
    // Whether the next physical line may continue the last logical line.
    let mut open = false;
    // Whether the next line continues a trailing `\`.
    let mut glued = false;
    for (index, physical) in text.lines().enumerate() {
        let physical = physical.strip_suffix('\r').unwrap_or(physical);
        let number = index as u64 + 1;
        if physical.is_empty() {
            open = false;
            glued = false;
            continue;
        }
        let continues = open && (glued || physical.starts_with([' ', '\t']));
        let (body, ends_glued) = match physical.strip_suffix('\\') {
            Some(body) if !body.ends_with('\\') => (body, true),
            _ => (physical, false),
        };
        match lines.last_mut() {
            Some((_, logical)) if continues => {
                if !glued {
                    logical.push(' ');
                }
                logical.push_str(if glued { body } else { body.trim_start() });
            }
            _ => lines.push((number, body.to_string())),
        }
        open = true;
        glued = ends_glued;
    }
    lines
        .into_iter()
        .map(|(number, logical)| (number, logical.trim().to_string()))
        .filter(|(_, logical)| !logical.is_empty() && !logical.starts_with('#'))
        .collect()
}

/// Splits a logical line into words as slapd does: whitespace separates outside `"` quotes,
/// quotes are removed, and a backslash makes the next character literal (and is removed).
pub(crate) fn split_words(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quoted = false;
    let mut characters = line.chars();
    while let Some(character) = characters.next() {
        match character {
            '"' => {
                quoted = !quoted;
                in_word = true;
            }
            '\\' => {
                word.push(characters.next().unwrap_or('\\'));
                in_word = true;
            }
            character if character.is_whitespace() && !quoted => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            character => {
                word.push(character);
                in_word = true;
            }
        }
    }
    if quoted {
        return Err(format!("unbalanced quote in {line:?}"));
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continuation_comments_and_quotes() {
        let text = "# top\n  still the comment\nsuffix \"dc=example, dc=com\"\nindex cn,sn\n  eq,sub\n\n  orphan\nrootdn cn=a\\\nb\n";
        let lines = logical_lines(text);
        assert_eq!(
            lines,
            vec![
                (3, "suffix \"dc=example, dc=com\"".to_string()),
                (4, "index cn,sn eq,sub".to_string()),
                // After a blank line an indented line starts a line of its own.
                (7, "orphan".to_string()),
                (8, "rootdn cn=ab".to_string()),
            ]
        );
        assert_eq!(
            split_words(&lines[0].1).unwrap(),
            vec!["suffix", "dc=example, dc=com"]
        );
        assert_eq!(
            split_words(r#"access to filter="(cn=a b)" by * read"#).unwrap(),
            vec!["access", "to", "filter=(cn=a b)", "by", "*", "read"]
        );
        // slapd.conf needs `\\,` for a DN's `\,`: a backslash escapes the next character.
        assert_eq!(
            split_words(r#"rootdn "cn=a\\,b \"q\",dc=x""#).unwrap(),
            vec!["rootdn", r#"cn=a\,b "q",dc=x"#]
        );
        assert!(split_words("suffix \"dc=x").is_err());
    }

    #[test]
    fn includes_schema_files_and_inline_statements() {
        let read = |path: &Path| -> std::io::Result<String> {
            match path.to_str() {
                Some("/s/core.schema") => {
                    Ok("# c\nattributetype ( 1.2 NAME 'a'\n  SYNTAX 1.3 )\n".into())
                }
                Some("/s/more.conf") => Ok("sizelimit 10\ninclude /s/more.conf\n".into()),
                _ => Err(std::io::Error::from(std::io::ErrorKind::NotFound)),
            }
        };
        let text = "include /s/core.schema\nobjectclass ( 1.4 NAME 'b'\n SUP top )\ntimelimit 5\n";
        let parsed = parse_slapd_conf(text, "slapd.conf", &read).unwrap();
        assert_eq!(
            parsed.schema,
            vec![
                SchemaSource::Existing(PathBuf::from("/s/core.schema")),
                SchemaSource::Written {
                    name: "slapd-conf-1".into(),
                    text: "objectclass ( 1.4 NAME 'b' SUP top )\n".into()
                }
            ]
        );
        assert_eq!(parsed.directives.len(), 1);
        assert_eq!(parsed.directives[0].location.line, 4);

        let looping = parse_slapd_conf("include /s/more.conf\n", "slapd.conf", &read).unwrap_err();
        assert!(looping.message.contains("nested deeper"), "{looping}");
        let missing = parse_slapd_conf("\ninclude /s/none\n", "slapd.conf", &read).unwrap_err();
        assert_eq!(missing.location.unwrap().line, 2);
    }
}
