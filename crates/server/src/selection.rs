//! The requested-attributes list of a search (RFC 4511 §4.5.1.8): `*`, `+`, `1.1`, names, and
//! (RFC 4529) `@objectClass` is not supported and treated as a name that matches nothing.

use crate::result::{code, OperationError};

/// Which attributes a search returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttributeSelection {
    /// No list, or `*` present: every user attribute.
    pub all_user: bool,
    /// `+` present: every operational attribute (RFC 3673).
    pub all_operational: bool,
    /// Names as requested, lowercased, options kept (`cn;lang-en`).
    pub names: Vec<String>,
}

impl AttributeSelection {
    pub fn from_request(requested: &[String]) -> AttributeSelection {
        let mut selection = AttributeSelection {
            all_user: requested.is_empty(),
            all_operational: false,
            names: Vec::new(),
        };
        let mut only_no_attributes = !requested.is_empty();
        for name in requested {
            let name = name.trim();
            match name {
                "*" => {
                    selection.all_user = true;
                    only_no_attributes = false;
                }
                "+" => {
                    selection.all_operational = true;
                    only_no_attributes = false;
                }
                "1.1" => {}
                "" => {}
                other => {
                    selection.names.push(other.to_ascii_lowercase());
                    only_no_attributes = false;
                }
            }
        }
        // "1.1" alone (or with nothing else meaningful) means no attributes; mixed with others it is ignored.
        if only_no_attributes {
            selection.all_user = false;
        }
        selection
    }

    /// Whether an attribute known by `names` (lowercase, primary first) is selected, given whether it is
    /// operational. Used where no schema is needed (root DSE, subschema entry).
    pub fn selects(&self, names: &[&str], operational: bool) -> bool {
        if operational {
            if self.all_operational {
                return true;
            }
        } else if self.all_user {
            return true;
        }
        self.names.iter().any(|requested| {
            let base = requested.split(';').next().unwrap_or(requested);
            names.iter().any(|name| name.eq_ignore_ascii_case(base))
        })
    }
}

/// Length of a requested attribute list (search, pre-read, post-read).
pub fn attribute_list_within_limits(
    settings: &crate::settings::ServerSettings,
    count: usize,
) -> Result<(), OperationError> {
    let attributes_max = settings.requested_attributes_max;
    if count > attributes_max {
        return Err(OperationError::new(
            code::ADMIN_LIMIT_EXCEEDED,
            format!("more than {attributes_max} attributes requested"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn selection(names: &[&str]) -> AttributeSelection {
        AttributeSelection::from_request(&names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn empty_list_means_all_user_attributes() {
        let chosen = selection(&[]);
        assert!(chosen.selects(&["cn"], false));
        assert!(!chosen.selects(&["createtimestamp"], true));
    }

    #[test]
    fn one_dot_one_alone_means_none_but_is_ignored_with_others() {
        assert!(!selection(&["1.1"]).selects(&["cn"], false));
        assert!(selection(&["1.1", "cn"]).selects(&["cn"], false));
        assert!(!selection(&["1.1", "cn"]).selects(&["sn"], false));
    }

    #[test]
    fn plus_selects_operational_and_names_select_either() {
        let chosen = selection(&["+", "CN"]);
        assert!(chosen.selects(&["entryuuid"], true));
        assert!(chosen.selects(&["cn", "commonname"], false));
        assert!(!chosen.selects(&["sn"], false));
        assert!(selection(&["namingContexts"]).selects(&["namingcontexts"], true));
    }
}
