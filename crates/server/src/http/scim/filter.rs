//! SCIM filters (RFC 7644 §3.4.2.2): parsed into a small tree, bounded (length, depth, items),
//! then either translated to the directory's `Filter` (list queries) or evaluated on a JSON
//! value (PATCH value paths such as `emails[value eq "x"]`).

use serde_json::Value;

/// Longest filter text accepted (400 invalidFilter beyond).
pub const FILTER_BYTES_MAX: usize = 4096;
/// Deepest nesting of parentheses, `not` and `[...]`.
pub const FILTER_DEPTH_MAX: usize = 16;
/// Most comparisons in one filter.
pub const FILTER_ITEMS_MAX: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    Eq,
    Ne,
    Co,
    Sw,
    Ew,
    Gt,
    Lt,
    Ge,
    Le,
    Pr,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Expression {
    And(Box<Expression>, Box<Expression>),
    Or(Box<Expression>, Box<Expression>),
    Not(Box<Expression>),
    /// `path op value` (`value` is Null for `pr`).
    Compare {
        path: String,
        operator: Operator,
        value: Value,
    },
    /// `path[filter]`: some element of the multi-valued `path` matches `filter`.
    ValuePath {
        path: String,
        filter: Box<Expression>,
    },
}

pub fn parse(text: &str) -> Result<Expression, String> {
    if text.len() > FILTER_BYTES_MAX {
        return Err(format!(
            "the filter is longer than {FILTER_BYTES_MAX} bytes"
        ));
    }
    let mut parser = Parser {
        text: text.as_bytes(),
        position: 0,
        items: 0,
    };
    let expression = parser.or(0)?;
    parser.skip_spaces();
    if parser.position != parser.text.len() {
        return Err(format!("unexpected text at byte {}", parser.position));
    }
    Ok(expression)
}

struct Parser<'a> {
    text: &'a [u8],
    position: usize,
    items: usize,
}

impl Parser<'_> {
    fn skip_spaces(&mut self) {
        while self.text.get(self.position) == Some(&b' ') {
            self.position += 1;
        }
    }

    /// The next word (letters, digits, `.`, `:`, `$`, `_`, `-`), not consumed.
    fn peek_word(&self) -> &str {
        let rest = &self.text[self.position..];
        let length = rest
            .iter()
            .take_while(|byte| byte.is_ascii_alphanumeric() || b".:$_-".contains(byte))
            .count();
        std::str::from_utf8(&rest[..length]).unwrap_or("")
    }

    fn word(&mut self) -> String {
        let word = self.peek_word().to_string();
        self.position += word.len();
        word
    }

    fn expect(&mut self, byte: u8) -> Result<(), String> {
        self.skip_spaces();
        if self.text.get(self.position) == Some(&byte) {
            self.position += 1;
            Ok(())
        } else {
            Err(format!(
                "expected '{}' at byte {}",
                byte as char, self.position
            ))
        }
    }

    fn or(&mut self, depth: usize) -> Result<Expression, String> {
        let mut left = self.and(depth)?;
        loop {
            self.skip_spaces();
            if !self.peek_word().eq_ignore_ascii_case("or") {
                return Ok(left);
            }
            self.word();
            let right = self.and(depth)?;
            left = Expression::Or(Box::new(left), Box::new(right));
        }
    }

    fn and(&mut self, depth: usize) -> Result<Expression, String> {
        let mut left = self.unary(depth)?;
        loop {
            self.skip_spaces();
            if !self.peek_word().eq_ignore_ascii_case("and") {
                return Ok(left);
            }
            self.word();
            let right = self.unary(depth)?;
            left = Expression::And(Box::new(left), Box::new(right));
        }
    }

    fn unary(&mut self, depth: usize) -> Result<Expression, String> {
        if depth >= FILTER_DEPTH_MAX {
            return Err(format!(
                "the filter nests deeper than {FILTER_DEPTH_MAX} levels"
            ));
        }
        self.skip_spaces();
        if self.text.get(self.position) == Some(&b'(') {
            self.position += 1;
            let inner = self.or(depth + 1)?;
            self.expect(b')')?;
            return Ok(inner);
        }
        if self.peek_word().eq_ignore_ascii_case("not") {
            self.word();
            self.expect(b'(')?;
            let inner = self.or(depth + 1)?;
            self.expect(b')')?;
            return Ok(Expression::Not(Box::new(inner)));
        }
        self.comparison(depth)
    }

    fn comparison(&mut self, depth: usize) -> Result<Expression, String> {
        let path = self.word();
        if path.is_empty() {
            return Err(format!("expected an attribute at byte {}", self.position));
        }
        if self.text.get(self.position) == Some(&b'[') {
            self.position += 1;
            let filter = self.or(depth + 1)?;
            self.expect(b']')?;
            return Ok(Expression::ValuePath {
                path,
                filter: Box::new(filter),
            });
        }
        self.items += 1;
        if self.items > FILTER_ITEMS_MAX {
            return Err(format!(
                "more than {FILTER_ITEMS_MAX} comparisons in the filter"
            ));
        }
        self.skip_spaces();
        let operator = match self.word().to_ascii_lowercase().as_str() {
            "eq" => Operator::Eq,
            "ne" => Operator::Ne,
            "co" => Operator::Co,
            "sw" => Operator::Sw,
            "ew" => Operator::Ew,
            "gt" => Operator::Gt,
            "lt" => Operator::Lt,
            "ge" => Operator::Ge,
            "le" => Operator::Le,
            "pr" => Operator::Pr,
            other => return Err(format!("unknown operator '{other}'")),
        };
        let value = if operator == Operator::Pr {
            Value::Null
        } else {
            self.value()?
        };
        Ok(Expression::Compare {
            path,
            operator,
            value,
        })
    }

    /// A JSON literal: string, number, true, false, null.
    fn value(&mut self) -> Result<Value, String> {
        self.skip_spaces();
        let start = self.position;
        if self.text.get(self.position) == Some(&b'"') {
            self.position += 1;
            while let Some(&byte) = self.text.get(self.position) {
                self.position += 1;
                match byte {
                    b'\\' => self.position += 1,
                    b'"' => {
                        let literal = &self.text[start..self.position.min(self.text.len())];
                        return serde_json::from_slice(literal)
                            .map_err(|error| format!("bad string literal: {error}"));
                    }
                    _ => {}
                }
            }
            return Err("unterminated string".to_string());
        }
        let word = self.word();
        serde_json::from_str(&word)
            .map_err(|_| format!("bad comparison value '{word}' at byte {start}"))
    }
}

/// Whether `value` (a resource or an element of a multi-valued attribute) matches.
pub fn matches_json(expression: &Expression, value: &Value) -> bool {
    match expression {
        Expression::And(left, right) => matches_json(left, value) && matches_json(right, value),
        Expression::Or(left, right) => matches_json(left, value) || matches_json(right, value),
        Expression::Not(inner) => !matches_json(inner, value),
        Expression::ValuePath { path, filter } => lookup(value, path)
            .into_iter()
            .any(|element| matches_json(filter, element)),
        Expression::Compare {
            path,
            operator,
            value: wanted,
        } => {
            let found = lookup(value, path);
            if *operator == Operator::Pr {
                return found.iter().any(|found| !found.is_null());
            }
            if *operator == Operator::Ne {
                return !found
                    .iter()
                    .any(|found| compare(found, Operator::Eq, wanted));
            }
            found.iter().any(|found| compare(found, *operator, wanted))
        }
    }
}

/// The values at a dotted path (arrays flattened); a bare element (a string in `members`)
/// answers its own `value`.
fn lookup<'v>(value: &'v Value, path: &str) -> Vec<&'v Value> {
    let mut current = vec![value];
    for part in path.split('.') {
        let mut next = Vec::new();
        for item in current {
            let items: Vec<&Value> = match item {
                Value::Array(items) => items.iter().collect(),
                other => vec![other],
            };
            for item in items {
                if let Some(found) = item.as_object().and_then(|object| {
                    object
                        .iter()
                        .find(|(key, _)| key.eq_ignore_ascii_case(part))
                        .map(|(_, value)| value)
                }) {
                    match found {
                        Value::Array(values) => next.extend(values.iter()),
                        other => next.push(other),
                    }
                }
            }
        }
        current = next;
    }
    current
}

fn compare(found: &Value, operator: Operator, wanted: &Value) -> bool {
    match (found, wanted) {
        (Value::String(found), Value::String(wanted)) => {
            let (found, wanted) = (found.to_lowercase(), wanted.to_lowercase());
            match operator {
                Operator::Eq => found == wanted,
                Operator::Co => found.contains(&wanted),
                Operator::Sw => found.starts_with(&wanted),
                Operator::Ew => found.ends_with(&wanted),
                Operator::Gt => found > wanted,
                Operator::Lt => found < wanted,
                Operator::Ge => found >= wanted,
                Operator::Le => found <= wanted,
                Operator::Ne | Operator::Pr => false,
            }
        }
        (Value::Bool(found), Value::Bool(wanted)) => operator == Operator::Eq && found == wanted,
        (Value::Number(found), Value::Number(wanted)) => {
            let (Some(found), Some(wanted)) = (found.as_f64(), wanted.as_f64()) else {
                return false;
            };
            match operator {
                Operator::Eq => found == wanted,
                Operator::Gt => found > wanted,
                Operator::Lt => found < wanted,
                Operator::Ge => found >= wanted,
                Operator::Le => found <= wanted,
                _ => false,
            }
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_parse_with_precedence_and_bounds() {
        let parsed = parse(r#"userName eq "bjensen" and (emails co "example" or not (title pr))"#)
            .expect("parses");
        assert!(matches!(parsed, Expression::And(_, _)));
        let deep = format!("{}userName pr{}", "(".repeat(40), ")".repeat(40));
        assert!(parse(&deep).unwrap_err().contains("deeper"));
        let wide = vec!["userName pr"; 100].join(" or ");
        assert!(parse(&wide).unwrap_err().contains("comparisons"));
        assert!(parse(&"a".repeat(FILTER_BYTES_MAX + 1)).is_err());
        assert!(parse("userName zz \"x\"").is_err());
        assert!(parse("userName eq").is_err());
    }

    #[test]
    fn value_paths_match_json_elements() {
        let filter = parse(r#"value eq "B""#).expect("parses");
        let element = serde_json::json!({"value": "b", "display": "x"});
        assert!(matches_json(&filter, &element));
        let filter = parse(r#"emails[type eq "work" and value co "@"]"#).expect("parses");
        let user = serde_json::json!({"emails": [{"type": "work", "value": "a@b"}]});
        assert!(matches_json(&filter, &user));
        assert!(!matches_json(
            &parse(r#"emails[type eq "home"]"#).unwrap(),
            &user
        ));
    }
}
