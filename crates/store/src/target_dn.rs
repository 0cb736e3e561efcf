//! The DN a write names, as the write methods take it (a leaf: only lmdir-schema's types).

use std::borrow::Cow;

use lmdir_schema::{Dn, LdapError, NormalizedDn, Schema};

/// A DN a write names: a [`NormalizedDn`] (the caller normalized it: used as it is, nothing
/// normalized again), or a `Dn` / DN text the store normalizes once for a caller that has
/// not (tools and tests; the server passes `NormalizedDn`s).
pub trait TargetDn {
    fn normalized<'a>(&'a self, schema: &Schema) -> Result<Cow<'a, NormalizedDn>, LdapError>;
}

impl TargetDn for NormalizedDn {
    fn normalized<'a>(&'a self, _: &Schema) -> Result<Cow<'a, NormalizedDn>, LdapError> {
        Ok(Cow::Borrowed(self))
    }
}

impl TargetDn for Dn {
    fn normalized<'a>(&'a self, schema: &Schema) -> Result<Cow<'a, NormalizedDn>, LdapError> {
        schema.normalized_dn(self.clone()).map(Cow::Owned)
    }
}

impl TargetDn for str {
    fn normalized<'a>(&'a self, schema: &Schema) -> Result<Cow<'a, NormalizedDn>, LdapError> {
        schema.parse_normalized_dn(self).map(Cow::Owned)
    }
}

impl TargetDn for String {
    fn normalized<'a>(&'a self, schema: &Schema) -> Result<Cow<'a, NormalizedDn>, LdapError> {
        self.as_str().normalized(schema)
    }
}
