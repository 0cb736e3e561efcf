//! The store's CSN state (a leaf module: `Inner` holds it; `context_csn` issues CSNs from it).

use lmdir_sync::CsnGenerator;

/// The server ID this store stamps and its generator, made at the first change after the
/// server ID is set (it reads the stored contextCSN to resume after it).
#[derive(Default)]
pub(crate) struct CsnState {
    pub(crate) sid: u16,
    pub(crate) generator: Option<CsnGenerator>,
}
