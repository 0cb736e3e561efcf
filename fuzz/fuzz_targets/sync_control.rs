//! The RFC 4533 value decoders (Sync Request, State, Done, Info): on any bytes they return, and a
//! value that decodes encodes to bytes that decode to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lmdir_sync::messages::SYNC_ID_SET_UUIDS_MAX;
use lmdir_sync::{SyncDone, SyncInfo, SyncRequest, SyncState};

fuzz_target!(|data: &[u8]| {
    if let Ok(value) = SyncRequest::decode(data) {
        assert_eq!(SyncRequest::decode(&value.encode()), Ok(value));
    }
    if let Ok(value) = SyncState::decode(data) {
        assert_eq!(SyncState::decode(&value.encode()), Ok(value));
    }
    if let Ok(value) = SyncDone::decode(data) {
        assert_eq!(SyncDone::decode(&value.encode()), Ok(value));
    }
    if let Ok(value) = SyncInfo::decode(data, SYNC_ID_SET_UUIDS_MAX) {
        assert_eq!(
            SyncInfo::decode(&value.encode(), SYNC_ID_SET_UUIDS_MAX),
            Ok(value)
        );
    }
});
