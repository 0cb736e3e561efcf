//! The root DSE (RFC 4512 §5.1): what this server supports, read by clients before anything else.
//! Everything advertised here is implemented.

use crate::ber::EntryWriter;
use crate::context::ServerContext;
use crate::controls;
use crate::selection::AttributeSelection;
use bytes::BytesMut;
use lmdir_schema::{Dn, Entry, OwnedEntryView, PreparedFilter, Schema};

/// One attribute of a synthesized entry.
pub struct SyntheticAttribute {
    pub name: &'static str,
    pub values: Vec<Vec<u8>>,
    pub operational: bool,
}

pub struct SyntheticEntry {
    pub dn: String,
    pub attributes: Vec<SyntheticAttribute>,
}

fn attribute(name: &'static str, values: Vec<String>, operational: bool) -> SyntheticAttribute {
    SyntheticAttribute {
        name,
        values: values.into_iter().map(String::into_bytes).collect(),
        operational,
    }
}

fn strings(values: &[&str]) -> Vec<String> {
    values.iter().map(|value| value.to_string()).collect()
}

/// The root DSE's structural class. Clients check every objectClass value of an entry against
/// cn=Subschema (python-ldap's strict check), so the class is published there too, under the OID
/// and name slapd uses for its root DSE; it is not part of the stored schema because no stored
/// entry may use it.
pub const ROOT_DSE_OBJECT_CLASS: &str = "LDAProotDSE";
/// `ROOT_DSE_OBJECT_CLASS`'s definition as published in cn=Subschema's objectClasses.
pub const ROOT_DSE_OBJECT_CLASS_DEFINITION: &str =
    "( 1.3.6.1.4.1.4203.1.4.1 NAME 'LDAProotDSE' DESC 'root DSE' SUP top STRUCTURAL MAY cn )";

pub fn root_dse(server: &ServerContext) -> SyntheticEntry {
    let extensions: Vec<String> =
        crate::extensions::supported_oids(server.has_database(), server.tls_config.is_some())
            .map(str::to_string)
            .collect();
    let mut attributes = vec![
        attribute(
            "objectClass",
            strings(&["top", ROOT_DSE_OBJECT_CLASS]),
            false,
        ),
        attribute("supportedLDAPVersion", strings(&["3"]), true),
        attribute(
            "supportedControl",
            controls::supported_control_oids()
                .map(str::to_string)
                .collect(),
            true,
        ),
        attribute("supportedExtension", extensions, true),
        attribute(
            "supportedFeatures",
            strings(&[
                "1.3.6.1.4.1.4203.1.5.1",
                "1.3.6.1.4.1.4203.1.5.2",
                "1.3.6.1.4.1.4203.1.5.3",
                "1.3.6.1.1.14",
            ]),
            true,
        ),
        attribute("subschemaSubentry", strings(&["cn=Subschema"]), true),
        attribute("vendorName", strings(&["lmdir"]), true),
        attribute(
            "vendorVersion",
            vec![format!("lmdir {}", env!("CARGO_PKG_VERSION"))],
            true,
        ),
        attribute("entryDN", vec![String::new()], true),
    ];
    if server.has_database() {
        attributes.push(attribute(
            "namingContexts",
            vec![server.settings().suffix.clone()],
            true,
        ));
    }
    if server.offers_ldapi() {
        attributes.push(attribute(
            "supportedSASLMechanisms",
            strings(&["EXTERNAL"]),
            true,
        ));
    }
    SyntheticEntry {
        dn: String::new(),
        attributes,
    }
}

/// Whether a synthesized entry matches a search filter: the evaluator of stored entries over
/// the entry's values normalized by the schema (an entry the schema cannot read matches nothing).
pub fn matches(entry: &SyntheticEntry, schema: &Schema, filter: &PreparedFilter) -> bool {
    let mut owned = Entry::new(Dn::root());
    for attribute in &entry.attributes {
        owned.add_values(attribute.name, attribute.values.iter().cloned());
    }
    OwnedEntryView::new(schema, &owned).is_ok_and(|view| filter.evaluate(&view).is_true())
}

/// Writes `entry` as a SearchResultEntry with the requested attributes.
pub fn write_entry(
    buffer: &mut BytesMut,
    message_id: i32,
    entry: &SyntheticEntry,
    selection: &AttributeSelection,
    types_only: bool,
) {
    let mut writer = EntryWriter::begin(buffer, message_id, entry.dn.as_bytes());
    for attribute in &entry.attributes {
        let lowercase = attribute.name.to_ascii_lowercase();
        if !selection.selects(&[lowercase.as_str()], attribute.operational) {
            continue;
        }
        if types_only {
            writer.attribute(attribute.name.as_bytes(), std::iter::empty());
        } else {
            writer.attribute(
                attribute.name.as_bytes(),
                attribute.values.iter().map(Vec::as_slice),
            );
        }
    }
    writer.finish(&[]);
}
