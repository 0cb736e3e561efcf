//! Reading OpenLDAP `.schema` text: statements (with continuation lines and comments),
//! RFC 4512 description tokens, and OID macros (`objectidentifier myOID 1.2.3`, `myOID:4`).

use std::collections::HashMap;

/// `{3}core` → `core`: the index slapd writes before each value of an `X-ORDERED 'VALUES'`
/// attribute (cn=config's olcAccess, olcDatabase `{-1}frontend`, authzTo/authzFrom); a value
/// without one, or with something else in braces (`{SSHA}...`), is returned as it is.
pub fn strip_ordering_prefix(value: &str) -> &str {
    let Some(rest) = value.strip_prefix('{') else {
        return value;
    };
    let Some(close) = rest.find('}') else {
        return value;
    };
    let number = &rest[..close];
    let number = number.strip_prefix('-').unwrap_or(number);
    if number.is_empty() || !number.bytes().all(|byte| byte.is_ascii_digit()) {
        return value;
    }
    &rest[close + 1..]
}

/// One statement and the line it starts on (1-based).
pub struct Statement {
    pub line: usize,
    pub text: String,
}

/// Splits schema text into statements: a line starting with non-whitespace starts one, lines
/// starting with whitespace continue it, `#` lines (after optional whitespace) and blank lines
/// are skipped.
pub fn statements(text: &str) -> Vec<Statement> {
    let mut statements: Vec<Statement> = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let continues = line.starts_with(|character: char| character.is_whitespace());
        match statements.last_mut() {
            Some(current) if continues => {
                current.text.push(' ');
                current.text.push_str(trimmed);
            }
            _ => statements.push(Statement {
                line: index + 1,
                text: trimmed.to_string(),
            }),
        }
    }
    statements
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Open,
    Close,
    Dollar,
    Quoted(String),
    Word(String),
}

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut characters = text.char_indices().peekable();
    while let Some((start, character)) = characters.next() {
        match character {
            _ if character.is_whitespace() => {}
            '(' => tokens.push(Token::Open),
            ')' => tokens.push(Token::Close),
            '$' => tokens.push(Token::Dollar),
            '\'' => {
                let mut quoted = String::new();
                let mut closed = false;
                while let Some((_, inner)) = characters.next() {
                    match inner {
                        '\'' => {
                            closed = true;
                            break;
                        }
                        '\\' => {
                            // RFC 4512 escapes: \27 for ', \5C for \.
                            let high = characters.next().map(|(_, c)| c);
                            let low = characters.next().map(|(_, c)| c);
                            match (high, low) {
                                (Some('2'), Some('7')) => quoted.push('\''),
                                (Some('5'), Some('c' | 'C')) => quoted.push('\\'),
                                _ => {
                                    return Err(format!(
                                        "bad escape in quoted string at offset {start}"
                                    ))
                                }
                            }
                        }
                        other => quoted.push(other),
                    }
                }
                if !closed {
                    return Err(format!(
                        "unterminated quoted string starting at offset {start}"
                    ));
                }
                tokens.push(Token::Quoted(quoted));
            }
            _ => {
                let mut word = String::from(character);
                while let Some((_, next)) = characters.peek() {
                    if next.is_whitespace() || matches!(next, '(' | ')' | '$' | '\'') {
                        break;
                    }
                    word.push(*next);
                    characters.next();
                }
                tokens.push(Token::Word(word));
            }
        }
    }
    Ok(tokens)
}

/// A parsed `( oid KEYWORD value ... )` description: OID (macros resolved), names, and every
/// other keyword with its values.
#[derive(Debug, Clone)]
pub struct Definition {
    pub oid: String,
    pub names: Vec<String>,
    fields: Vec<(String, Vec<String>)>,
}

const FLAG_KEYWORDS: &[&str] = &[
    "OBSOLETE",
    "SINGLE-VALUE",
    "COLLECTIVE",
    "NO-USER-MODIFICATION",
    "ABSTRACT",
    "STRUCTURAL",
    "AUXILIARY",
];
const VALUE_KEYWORDS: &[&str] = &[
    "NAME", "DESC", "SUP", "EQUALITY", "ORDERING", "SUBSTR", "SYNTAX", "USAGE", "MUST", "MAY",
];

impl Definition {
    fn values(&self, keyword: &str) -> Option<&Vec<String>> {
        self.fields
            .iter()
            .find(|(name, _)| name == keyword)
            .map(|(_, values)| values)
    }

    /// The single value of a keyword (None when absent; an error when it has several).
    pub fn single(&self, keyword: &str) -> Result<Option<String>, String> {
        match self.values(keyword).map(Vec::as_slice) {
            None => Ok(None),
            Some([single]) => Ok(Some(single.clone())),
            Some(_) => Err(format!("'{}': {keyword} takes exactly one value", self.oid)),
        }
    }

    pub fn list(&self, keyword: &str) -> Vec<String> {
        self.values(keyword).cloned().unwrap_or_default()
    }

    pub fn flag(&self, keyword: &str) -> bool {
        self.values(keyword).is_some()
    }

    pub fn extensions(&self) -> Vec<(String, Vec<String>)> {
        self.fields
            .iter()
            .filter(|(name, _)| name.starts_with("X-"))
            .cloned()
            .collect()
    }
}

/// Parses an RFC 4512 description in parentheses.
pub fn parse_definition(
    text: &str,
    oid_macros: &HashMap<String, String>,
) -> Result<Definition, String> {
    let tokens = tokenize(text)?;
    let mut position = 0;
    if tokens.first() != Some(&Token::Open) {
        return Err("definition must start with '('".to_string());
    }
    position += 1;
    let oid_text = match tokens.get(position) {
        Some(Token::Word(word) | Token::Quoted(word)) => word.clone(),
        _ => return Err("definition must start with an OID after '('".to_string()),
    };
    position += 1;
    let oid = resolve_oid(&oid_text, oid_macros)?;
    let mut fields: Vec<(String, Vec<String>)> = Vec::new();
    loop {
        let keyword = match tokens.get(position) {
            Some(Token::Close) => {
                if position + 1 != tokens.len() {
                    return Err(format!("'{oid}': text after the closing ')'"));
                }
                break;
            }
            Some(Token::Word(word)) => word.to_ascii_uppercase(),
            Some(other) => return Err(format!("'{oid}': expected a keyword, found {other:?}")),
            None => return Err(format!("'{oid}': missing closing ')'")),
        };
        position += 1;
        if fields.iter().any(|(existing, _)| *existing == keyword) {
            return Err(format!("'{oid}': {keyword} appears twice"));
        }
        let values = if FLAG_KEYWORDS.contains(&keyword.as_str()) {
            Vec::new()
        } else if VALUE_KEYWORDS.contains(&keyword.as_str()) || keyword.starts_with("X-") {
            match tokens.get(position) {
                Some(Token::Word(word) | Token::Quoted(word)) => {
                    position += 1;
                    vec![word.clone()]
                }
                Some(Token::Open) => {
                    position += 1;
                    let mut values = Vec::new();
                    loop {
                        match tokens.get(position) {
                            Some(Token::Close) => {
                                position += 1;
                                break;
                            }
                            Some(Token::Dollar) => position += 1,
                            Some(Token::Word(word) | Token::Quoted(word)) => {
                                values.push(word.clone());
                                position += 1;
                            }
                            Some(Token::Open) => {
                                return Err(format!("'{oid}': nested '(' in {keyword}"))
                            }
                            None => {
                                return Err(format!("'{oid}': unterminated list after {keyword}"))
                            }
                        }
                    }
                    values
                }
                _ => return Err(format!("'{oid}': {keyword} needs a value")),
            }
        } else {
            return Err(format!("'{oid}': unknown keyword '{keyword}'"));
        };
        fields.push((keyword, values));
    }
    let names = fields
        .iter()
        .find(|(name, _)| name == "NAME")
        .map(|(_, values)| values.clone())
        .unwrap_or_default();
    for name in &names {
        let valid = name.starts_with(|character: char| character.is_ascii_alphabetic())
            && name
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_');
        if !valid {
            return Err(format!("'{oid}': invalid name '{name}'"));
        }
    }
    Ok(Definition { oid, names, fields })
}

/// Resolves `1.2.3`, `macro` or `macro:4.5` to a numeric OID.
pub fn resolve_oid(text: &str, oid_macros: &HashMap<String, String>) -> Result<String, String> {
    let is_numeric = |candidate: &str| {
        !candidate.is_empty()
            && candidate
                .split('.')
                .all(|arc| !arc.is_empty() && arc.bytes().all(|byte| byte.is_ascii_digit()))
    };
    if is_numeric(text) {
        return Ok(text.to_string());
    }
    let (macro_name, suffix) = match text.split_once(':') {
        Some((name, suffix)) => (name, Some(suffix)),
        None => (text, None),
    };
    let base = oid_macros
        .get(&macro_name.to_ascii_lowercase())
        .ok_or_else(|| {
            format!("'{text}' is neither a numeric OID nor a defined objectidentifier macro")
        })?;
    let resolved = match suffix {
        Some(suffix) if is_numeric(suffix) => format!("{base}.{suffix}"),
        Some(suffix) => return Err(format!("'{text}': OID suffix '{suffix}' is not numeric")),
        None => base.clone(),
    };
    Ok(resolved)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_join_continuations_and_skip_comments() {
        let text = "# comment\nattributetype ( 1.2 NAME 'a'\n\tSYNTAX 1.3 )\n\n  # indented comment\nobjectclass ( 1.4\n  NAME 'b' )\n";
        let found = statements(text);
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].line, 2);
        assert_eq!(found[0].text, "attributetype ( 1.2 NAME 'a' SYNTAX 1.3 )");
        assert_eq!(found[1].line, 6);
    }

    #[test]
    fn definitions_parse_lists_flags_and_escapes() {
        let macros = HashMap::from([("myoid".to_string(), "1.3.6.1.4.1.99999".to_string())]);
        let definition = parse_definition(
            "( myOID:1.2 NAME ( 'a' 'b' ) DESC 'it\\27s' MUST ( x $ y ) MAY z SINGLE-VALUE X-ORIGIN 'test' )",
            &macros,
        )
        .unwrap();
        assert_eq!(definition.oid, "1.3.6.1.4.1.99999.1.2");
        assert_eq!(definition.names, vec!["a", "b"]);
        assert_eq!(definition.single("DESC").unwrap().as_deref(), Some("it's"));
        assert_eq!(definition.list("MUST"), vec!["x", "y"]);
        assert_eq!(definition.list("MAY"), vec!["z"]);
        assert!(definition.flag("SINGLE-VALUE"));
        assert!(!definition.flag("OBSOLETE"));
        assert_eq!(
            definition.extensions(),
            vec![("X-ORIGIN".to_string(), vec!["test".to_string()])]
        );
        assert!(definition.single("MUST").is_err());
    }

    #[test]
    fn bad_definitions_say_what_is_wrong() {
        let macros = HashMap::new();
        assert!(parse_definition("1.2 NAME 'a' )", &macros)
            .unwrap_err()
            .contains("start with '('"));
        assert!(parse_definition("( 1.2 NAME 'a'", &macros)
            .unwrap_err()
            .contains("missing closing"));
        assert!(parse_definition("( 1.2 NAME 'a )", &macros)
            .unwrap_err()
            .contains("unterminated"));
        assert!(parse_definition("( 1.2 FOO 'a' )", &macros)
            .unwrap_err()
            .contains("unknown keyword 'FOO'"));
        assert!(parse_definition("( 1.2 NAME 'a' NAME 'b' )", &macros)
            .unwrap_err()
            .contains("twice"));
        assert!(parse_definition("( unknownMacro:1 NAME 'a' )", &macros)
            .unwrap_err()
            .contains("objectidentifier"));
        assert!(parse_definition("( 1.2 NAME '1bad' )", &macros)
            .unwrap_err()
            .contains("invalid name"));
    }
}
