//! Paged results (RFC 2696) without server state: the cookie carries where to resume and how
//! many entries were returned, sealed by a keyed tag over the request's fingerprint.

use crate::ber::ResponseControl;
use crate::context::Database;
use crate::request::SearchRequest;
use crate::result::{code, OperationError};
use bytes::BytesMut;
use lmdir_store::TreePosition;

/// SHA-256 of what must stay the same between pages (RFC 2696 §3): the connection, base,
/// scope, filter, attributes, size limit and sort keys (a sorted search's cookie holds a
/// position in the sorted order, not an entry ID).
pub(super) fn request_fingerprint(
    request: &SearchRequest,
    sort: Option<&[crate::controls::SortKey]>,
    connection_id: u64,
) -> [u8; 32] {
    use sha2::Digest;
    let text = format!(
        "{}\u{0}{}\u{0}{}\u{0}{:?}\u{0}{:?}\u{0}{}\u{0}{}\u{0}{:?}",
        connection_id,
        request.base,
        request.scope.clone() as i64,
        // The filter's BER, exactly as the client sent it.
        request.filter.as_bytes(),
        request.attrs,
        request.sizelimit,
        request.typesonly,
        sort
    );
    sha2::Sha256::digest(text.as_bytes()).into()
}

pub(super) fn paged_response_control(cookie: &[u8]) -> ResponseControl {
    let mut value = BytesMut::new();
    let mut writer = crate::ber::BerWriter::new(&mut value);
    writer.open(crate::ber::tag::SEQUENCE);
    writer.integer(crate::ber::tag::INTEGER, 0);
    writer.octet_string(cookie);
    writer.close();
    drop(writer);
    ResponseControl {
        oid: crate::controls::PAGED_RESULTS_OID.to_string(),
        criticality: false,
        value: Some(value.to_vec()),
    }
}

/// Where a paged search stands, from its cookie.
pub(super) struct PageRequest {
    /// What must stay the same between pages (`request_fingerprint`).
    pub(super) fingerprint: [u8; 32],
    pub(super) size: u64,
    /// Unsorted: the tree position of the first entry not sent yet (parents-first order, see
    /// lmdir_store::TreePosition); sorted: the index reached in the sorted order, as `id`.
    pub(super) resume: Option<TreePosition>,
    /// Entries the earlier pages of this paged search returned (the size limit is a total).
    pub(super) sent_before: u64,
}

/// Bytes of a paged-results cookie's keyed hash.
const COOKIE_TAG_BYTES: usize = 16;
/// A cookie: resume point (a tree position, 12 bytes), entries sent so far (u64 BE), tag.
const COOKIE_BYTES: usize = TreePosition::BYTES + 8 + COOKIE_TAG_BYTES;

impl Database {
    fn cookie_tag(
        &self,
        fingerprint: &[u8; 32],
        resume: TreePosition,
        sent: u64,
    ) -> [u8; COOKIE_TAG_BYTES] {
        use sha2::Digest;
        let mut hash = sha2::Sha256::new();
        hash.update(self.cookie_key);
        hash.update(fingerprint);
        hash.update(resume.to_bytes());
        hash.update(sent.to_be_bytes());
        let digest = hash.finalize();
        let mut tag = [0u8; COOKIE_TAG_BYTES];
        tag.copy_from_slice(&digest[..COOKIE_TAG_BYTES]);
        tag
    }

    /// A paged-results cookie for this request (`fingerprint`): where the next page resumes and
    /// how many entries the paged search has returned, under a tag keyed by a secret of this
    /// server, so a client can neither reset the count nor move the cookie to another search
    /// or connection. The server keeps no paged-search state at all.
    pub(super) fn seal_cookie(
        &self,
        fingerprint: &[u8; 32],
        resume: TreePosition,
        sent: u64,
    ) -> Vec<u8> {
        let mut cookie = Vec::with_capacity(COOKIE_BYTES);
        cookie.extend_from_slice(&resume.to_bytes());
        cookie.extend_from_slice(&sent.to_be_bytes());
        cookie.extend_from_slice(&self.cookie_tag(fingerprint, resume, sent));
        cookie
    }

    /// The page a paged-results control asks for (an empty cookie starts the search).
    pub(super) fn open_cookie(
        &self,
        fingerprint: [u8; 32],
        size: i64,
        cookie: &[u8],
    ) -> Result<PageRequest, OperationError> {
        let size = u64::try_from(size).unwrap_or(0);
        if cookie.is_empty() {
            return Ok(PageRequest {
                fingerprint,
                size,
                resume: None,
                sent_before: 0,
            });
        }
        let foreign = || {
            OperationError::new(
                code::UNWILLING_TO_PERFORM,
                "paged results cookie does not belong to this search",
            )
        };
        if cookie.len() != COOKIE_BYTES {
            return Err(foreign());
        }
        let (resume, rest) = cookie.split_at(TreePosition::BYTES);
        let resume = TreePosition::from_bytes(resume).ok_or_else(foreign)?;
        let sent = u64::from_be_bytes(rest[0..8].try_into().map_err(|_| foreign())?);
        let expected = self.cookie_tag(&fingerprint, resume, sent);
        // Every byte compared whatever the first difference, so timing tells nothing.
        let difference = expected
            .iter()
            .zip(&rest[8..])
            .fold(0u8, |difference, (left, right)| difference | (left ^ right));
        if difference != 0 {
            return Err(foreign());
        }
        Ok(PageRequest {
            fingerprint,
            size,
            resume: Some(resume),
            sent_before: sent,
        })
    }
}
