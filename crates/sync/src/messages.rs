//! BER values of RFC 4533's controls and intermediate response (§2.2–2.5), encoded byte for byte
//! as OpenLDAP writes them and decoded strictly.
//!
//! OpenLDAP's encoders (libldap/slapd, all with `LBER_USE_DER`, so minimal lengths):
//! - Sync Request (syncrepl consumer, `ldap_sync_init`): `{ mode, cookie if any, reloadHint }`,
//!   reloadHint written even when FALSE.
//! - Sync State (syncprov): `{ state, entryUUID, cookie if any }`.
//! - Sync Done (syncprov): `{ cookie if any, refreshDeletes only when TRUE }`.
//! - Sync Info (syncprov): `newcookie [0]`; `refreshDelete [1]` / `refreshPresent [2]`
//!   `{ cookie if any, refreshDone only when FALSE }`; `syncIdSet [3] { cookie if any,
//!   refreshDeletes only when TRUE, SET OF uuid }`.
//!
//! Decoders accept BER's freedoms that OpenLDAP's own decoder accepts (a DEFAULT value written
//! out, any non-zero octet as TRUE) and refuse everything else: trailing bytes, unknown or
//! misplaced elements, non-minimal or indefinite lengths, constructed strings, UUIDs that are
//! not 16 bytes, values above the limits below.

use crate::cookie::COOKIE_BYTES_MAX;
use bytes::BytesMut;
use ldap3_lber::common::TagClass;
use ldap3_lber::structure::{StructureTag, PL};
use ldap3_lber::write::encode_into;
use ldap3_lber::Parser;

pub const SYNC_REQUEST_OID: &str = "1.3.6.1.4.1.4203.1.9.1.1";
pub const SYNC_STATE_OID: &str = "1.3.6.1.4.1.4203.1.9.1.2";
pub const SYNC_DONE_OID: &str = "1.3.6.1.4.1.4203.1.9.1.3";
pub const SYNC_INFO_OID: &str = "1.3.6.1.4.1.4203.1.9.1.4";
/// The result code a provider answers when the consumer must start over with a full reload.
pub const E_SYNC_REFRESH_REQUIRED: u32 = 4096;
/// An entryUUID on the wire: the 16 raw bytes.
pub const UUID_BYTES: usize = 16;
/// The most UUIDs accepted in one syncIdSet. slapd sends present sets of 256 UUIDs during a
/// refresh, but a delete set from its session log holds every logged delete at once, so the
/// bound follows the largest sensible session log (65,536 deletes, ~1.2 MB of message), not 256.
pub const SYNC_ID_SET_UUIDS_MAX: usize = 65_536;
/// Nesting the messages need (syncIdSet → SET → OCTET STRING), plus the parser's own count.
const BER_DEPTH_MAX: usize = 4;

const ENUMERATED: u64 = 10;
const OCTET_STRING: u64 = 4;
const BOOLEAN: u64 = 1;
const SEQUENCE: u64 = 16;
const SET: u64 = 17;

/// Sync Request mode (RFC 4533 §2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncMode {
    RefreshOnly = 1,
    RefreshAndPersist = 3,
}

/// Sync Request control value: `{ mode, cookie OPTIONAL, reloadHint DEFAULT FALSE }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncRequest {
    pub mode: SyncMode,
    pub cookie: Option<Vec<u8>>,
    pub reload_hint: bool,
}

/// Sync State's state (RFC 4533 §2.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncStateKind {
    Present = 0,
    Add = 1,
    Modify = 2,
    Delete = 3,
}

/// Sync State control value: `{ state, entryUUID, cookie OPTIONAL }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncState {
    pub state: SyncStateKind,
    pub entry_uuid: [u8; UUID_BYTES],
    pub cookie: Option<Vec<u8>>,
}

/// Sync Done control value: `{ cookie OPTIONAL, refreshDeletes DEFAULT FALSE }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncDone {
    pub cookie: Option<Vec<u8>>,
    pub refresh_deletes: bool,
}

/// Sync Info intermediate response value (RFC 4533 §2.5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyncInfo {
    /// `newcookie [0] syncCookie`
    NewCookie(Vec<u8>),
    /// `refreshDelete [1] { cookie OPTIONAL, refreshDone DEFAULT TRUE }`
    RefreshDelete {
        cookie: Option<Vec<u8>>,
        refresh_done: bool,
    },
    /// `refreshPresent [2] { cookie OPTIONAL, refreshDone DEFAULT TRUE }`
    RefreshPresent {
        cookie: Option<Vec<u8>>,
        refresh_done: bool,
    },
    /// `syncIdSet [3] { cookie OPTIONAL, refreshDeletes DEFAULT FALSE, syncUUIDs SET OF }`
    SyncIdSet {
        cookie: Option<Vec<u8>>,
        refresh_deletes: bool,
        uuids: Vec<[u8; UUID_BYTES]>,
    },
}

/// Why a value was refused. Every one is a protocolError for the operation carrying it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("sync value: {0}")]
    Malformed(&'static str),
    #[error("sync cookie is {0} bytes, above the limit of {COOKIE_BYTES_MAX}")]
    CookieTooLong(usize),
    #[error("syncIdSet holds {found} UUIDs, above the limit of {limit}")]
    TooManyUuids { found: usize, limit: usize },
}

use DecodeError::Malformed;

// ---- encoding -------------------------------------------------------------------------------

fn primitive(class: TagClass, id: u64, content: Vec<u8>) -> StructureTag {
    StructureTag {
        class,
        id,
        payload: PL::P(content),
    }
}

fn constructed(class: TagClass, id: u64, children: Vec<StructureTag>) -> StructureTag {
    StructureTag {
        class,
        id,
        payload: PL::C(children),
    }
}

fn octet_string(content: &[u8]) -> StructureTag {
    primitive(TagClass::Universal, OCTET_STRING, content.to_vec())
}

/// TRUE is 0xFF, as liblber and DER write it.
fn boolean(value: bool) -> StructureTag {
    primitive(
        TagClass::Universal,
        BOOLEAN,
        vec![if value { 0xff } else { 0 }],
    )
}

/// The enumerations here are 0..=3: one content octet.
fn enumerated(value: u8) -> StructureTag {
    primitive(TagClass::Universal, ENUMERATED, vec![value])
}

fn sequence(children: Vec<StructureTag>) -> StructureTag {
    constructed(TagClass::Universal, SEQUENCE, children)
}

fn to_bytes(tag: StructureTag) -> Vec<u8> {
    let mut buffer = BytesMut::new();
    encode_into(&mut buffer, tag).expect("BER encoding into memory does not fail");
    buffer.to_vec()
}

/// `cookie` then, when it differs from its DEFAULT, a BOOLEAN: the body OpenLDAP writes.
fn cookie_and_flag(cookie: &Option<Vec<u8>>, flag: bool, default: bool) -> Vec<StructureTag> {
    let mut children: Vec<StructureTag> = cookie.iter().map(|c| octet_string(c)).collect();
    if flag != default {
        children.push(boolean(flag));
    }
    children
}

impl SyncRequest {
    pub fn encode(&self) -> Vec<u8> {
        let mut children = vec![enumerated(self.mode as u8)];
        children.extend(self.cookie.iter().map(|cookie| octet_string(cookie)));
        children.push(boolean(self.reload_hint));
        to_bytes(sequence(children))
    }

    pub fn decode(value: &[u8]) -> Result<SyncRequest, DecodeError> {
        let mut elements = Elements::of_sequence(parse_strict(value)?)?;
        let mode = match elements.take_enumerated()? {
            1 => SyncMode::RefreshOnly,
            3 => SyncMode::RefreshAndPersist,
            _ => {
                return Err(Malformed(
                    "mode must be refreshOnly(1) or refreshAndPersist(3)",
                ))
            }
        };
        let cookie = elements.take_cookie()?;
        let reload_hint = elements.take_boolean()?.unwrap_or(false);
        elements.finish()?;
        Ok(SyncRequest {
            mode,
            cookie,
            reload_hint,
        })
    }
}

impl SyncState {
    pub fn encode(&self) -> Vec<u8> {
        let mut children = vec![enumerated(self.state as u8), octet_string(&self.entry_uuid)];
        children.extend(self.cookie.iter().map(|cookie| octet_string(cookie)));
        to_bytes(sequence(children))
    }

    pub fn decode(value: &[u8]) -> Result<SyncState, DecodeError> {
        let mut elements = Elements::of_sequence(parse_strict(value)?)?;
        let state = match elements.take_enumerated()? {
            0 => SyncStateKind::Present,
            1 => SyncStateKind::Add,
            2 => SyncStateKind::Modify,
            3 => SyncStateKind::Delete,
            _ => {
                return Err(Malformed(
                    "state must be present, add, modify or delete (0..=3)",
                ))
            }
        };
        let uuid = elements
            .take_octet_string()?
            .ok_or(Malformed("entryUUID missing"))?;
        let entry_uuid = uuid_from(uuid)?;
        let cookie = elements.take_cookie()?;
        elements.finish()?;
        Ok(SyncState {
            state,
            entry_uuid,
            cookie,
        })
    }
}

impl SyncDone {
    pub fn encode(&self) -> Vec<u8> {
        to_bytes(sequence(cookie_and_flag(
            &self.cookie,
            self.refresh_deletes,
            false,
        )))
    }

    pub fn decode(value: &[u8]) -> Result<SyncDone, DecodeError> {
        let mut elements = Elements::of_sequence(parse_strict(value)?)?;
        let cookie = elements.take_cookie()?;
        let refresh_deletes = elements.take_boolean()?.unwrap_or(false);
        elements.finish()?;
        Ok(SyncDone {
            cookie,
            refresh_deletes,
        })
    }
}

impl SyncInfo {
    pub fn encode(&self) -> Vec<u8> {
        let tag = match self {
            SyncInfo::NewCookie(cookie) => primitive(TagClass::Context, 0, cookie.clone()),
            SyncInfo::RefreshDelete {
                cookie,
                refresh_done,
            } => constructed(
                TagClass::Context,
                1,
                cookie_and_flag(cookie, *refresh_done, true),
            ),
            SyncInfo::RefreshPresent {
                cookie,
                refresh_done,
            } => constructed(
                TagClass::Context,
                2,
                cookie_and_flag(cookie, *refresh_done, true),
            ),
            SyncInfo::SyncIdSet {
                cookie,
                refresh_deletes,
                uuids,
            } => {
                let mut children = cookie_and_flag(cookie, *refresh_deletes, false);
                let set = uuids.iter().map(|uuid| octet_string(uuid)).collect();
                children.push(constructed(TagClass::Universal, SET, set));
                constructed(TagClass::Context, 3, children)
            }
        };
        to_bytes(tag)
    }

    /// Decodes a Sync Info value; a syncIdSet may hold at most `uuids_max` UUIDs
    /// ([`SYNC_ID_SET_UUIDS_MAX`] unless the caller knows better).
    pub fn decode(value: &[u8], uuids_max: usize) -> Result<SyncInfo, DecodeError> {
        let tag = parse_strict(value)?;
        if tag.class != TagClass::Context {
            return Err(Malformed(
                "Sync Info must be a context-tagged choice [0]..[3]",
            ));
        }
        match (tag.id, tag.payload) {
            (0, PL::P(cookie)) => Ok(SyncInfo::NewCookie(checked_cookie(cookie)?)),
            (id @ (1 | 2), PL::C(children)) => {
                let mut elements = Elements::new(children);
                let cookie = elements.take_cookie()?;
                let refresh_done = elements.take_boolean()?.unwrap_or(true);
                elements.finish()?;
                Ok(if id == 1 {
                    SyncInfo::RefreshDelete {
                        cookie,
                        refresh_done,
                    }
                } else {
                    SyncInfo::RefreshPresent {
                        cookie,
                        refresh_done,
                    }
                })
            }
            (3, PL::C(children)) => decode_sync_id_set(children, uuids_max),
            _ => Err(Malformed(
                "Sync Info choice must be newcookie [0] (primitive) or [1]..[3] (constructed)",
            )),
        }
    }
}

fn decode_sync_id_set(
    children: Vec<StructureTag>,
    uuids_max: usize,
) -> Result<SyncInfo, DecodeError> {
    let mut elements = Elements::new(children);
    let cookie = elements.take_cookie()?;
    let refresh_deletes = elements.take_boolean()?.unwrap_or(false);
    let set = elements
        .take(TagClass::Universal, SET)
        .ok_or(Malformed("syncIdSet lacks its SET OF syncUUIDs"))?
        .expect_constructed()
        .ok_or(Malformed("syncUUIDs must be a constructed SET"))?;
    elements.finish()?;
    if set.len() > uuids_max {
        return Err(DecodeError::TooManyUuids {
            found: set.len(),
            limit: uuids_max,
        });
    }
    let uuids = set
        .into_iter()
        .map(|uuid| {
            let bytes = uuid
                .match_class(TagClass::Universal)
                .and_then(|uuid| uuid.match_id(OCTET_STRING))
                .and_then(StructureTag::expect_primitive)
                .ok_or(Malformed("syncUUIDs must hold OCTET STRINGs"))?;
            uuid_from(bytes)
        })
        .collect::<Result<_, _>>()?;
    Ok(SyncInfo::SyncIdSet {
        cookie,
        refresh_deletes,
        uuids,
    })
}

// ---- decoding -------------------------------------------------------------------------------

/// One BER element filling `value` exactly, in the minimal definite-length form OpenLDAP (DER
/// mode) and ldap3 write. ldap3_lber's parser tolerates indefinite lengths, high tag numbers and
/// a truncated last element inside a constructed one; writing the tree back and comparing
/// refuses all of those with one check.
fn parse_strict(value: &[u8]) -> Result<StructureTag, DecodeError> {
    let (rest, tag) = Parser::new(BER_DEPTH_MAX)
        .parse(value)
        .map_err(|_| Malformed("undecodable BER (truncated, or nested too deep)"))?;
    if !rest.is_empty() {
        return Err(Malformed("trailing bytes after the value"));
    }
    if to_bytes(tag.clone()) != value {
        return Err(Malformed(
            "not minimal definite-length BER, or an element inside is truncated",
        ));
    }
    Ok(tag)
}

fn uuid_from(bytes: Vec<u8>) -> Result<[u8; UUID_BYTES], DecodeError> {
    <[u8; UUID_BYTES]>::try_from(bytes).map_err(|_| Malformed("a UUID must be 16 bytes"))
}

fn checked_cookie(cookie: Vec<u8>) -> Result<Vec<u8>, DecodeError> {
    if cookie.len() > COOKIE_BYTES_MAX {
        return Err(DecodeError::CookieTooLong(cookie.len()));
    }
    Ok(cookie)
}

/// The elements of a SEQUENCE, taken in order; each optional one is taken only if its tag is next.
struct Elements {
    items: std::iter::Peekable<std::vec::IntoIter<StructureTag>>,
}

impl Elements {
    fn new(children: Vec<StructureTag>) -> Elements {
        Elements {
            items: children.into_iter().peekable(),
        }
    }

    fn of_sequence(tag: StructureTag) -> Result<Elements, DecodeError> {
        let children = tag
            .match_class(TagClass::Universal)
            .and_then(|tag| tag.match_id(SEQUENCE))
            .and_then(StructureTag::expect_constructed)
            .ok_or(Malformed("value must be a SEQUENCE"))?;
        Ok(Elements::new(children))
    }

    fn take(&mut self, class: TagClass, id: u64) -> Option<StructureTag> {
        self.items
            .next_if(|item| item.class == class && item.id == id)
    }

    /// The next element's content if it is a universal primitive with tag `id`.
    fn take_primitive(
        &mut self,
        id: u64,
        what: &'static str,
    ) -> Result<Option<Vec<u8>>, DecodeError> {
        match self.take(TagClass::Universal, id) {
            None => Ok(None),
            Some(tag) => tag.expect_primitive().map(Some).ok_or(Malformed(what)),
        }
    }

    fn take_octet_string(&mut self) -> Result<Option<Vec<u8>>, DecodeError> {
        self.take_primitive(OCTET_STRING, "OCTET STRING must be primitive")
    }

    fn take_cookie(&mut self) -> Result<Option<Vec<u8>>, DecodeError> {
        self.take_octet_string()?.map(checked_cookie).transpose()
    }

    fn take_boolean(&mut self) -> Result<Option<bool>, DecodeError> {
        match self.take_primitive(BOOLEAN, "BOOLEAN must be primitive")? {
            None => Ok(None),
            Some(content) if content.len() == 1 => Ok(Some(content[0] != 0)),
            Some(_) => Err(Malformed("BOOLEAN must be one octet")),
        }
    }

    /// A required ENUMERATED of one octet (every value here is 0..=3; BER forbids padding).
    fn take_enumerated(&mut self) -> Result<u8, DecodeError> {
        match self.take_primitive(ENUMERATED, "ENUMERATED must be primitive")? {
            Some(content) if content.len() == 1 => Ok(content[0]),
            Some(_) => Err(Malformed("ENUMERATED value out of range")),
            None => Err(Malformed("ENUMERATED missing")),
        }
    }

    fn finish(mut self) -> Result<(), DecodeError> {
        match self.items.next() {
            None => Ok(()),
            Some(_) => Err(Malformed("unexpected element (wrong tag, order, or extra)")),
        }
    }
}
