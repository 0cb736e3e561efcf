//! The owned entry model used by LDIF, the loader and server writes, and modifications.

use crate::dn::Dn;

/// One attribute of an entry: its description as written (`cn`, `cn;lang-en`) and its values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attribute {
    pub description: String,
    pub values: Vec<Vec<u8>>,
}

/// An entry: DN and attributes in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub dn: Dn,
    pub attributes: Vec<Attribute>,
}

impl Entry {
    pub fn new(dn: Dn) -> Entry {
        Entry {
            dn,
            attributes: Vec::new(),
        }
    }

    /// Adds values under `description`, appending to an attribute with the same description
    /// (compared case-insensitively) or adding a new one.
    pub fn add_values(&mut self, description: &str, values: impl IntoIterator<Item = Vec<u8>>) {
        match self
            .attributes
            .iter_mut()
            .find(|attribute| attribute.description.eq_ignore_ascii_case(description))
        {
            Some(attribute) => attribute.values.extend(values),
            None => self.attributes.push(Attribute {
                description: description.to_string(),
                values: values.into_iter().collect(),
            }),
        }
    }

    /// The attribute whose description equals `description` (case-insensitive, exact options).
    pub fn attribute(&self, description: &str) -> Option<&Attribute> {
        self.attributes
            .iter()
            .find(|attribute| attribute.description.eq_ignore_ascii_case(description))
    }
}

/// The kind of change in a modify request (RFC 4511 §4.6, RFC 4525 increment).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ModOp {
    Add,
    Delete,
    Replace,
    Increment,
}

/// One change of a modify request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Modification {
    pub op: ModOp,
    pub description: String,
    pub values: Vec<Vec<u8>>,
}
