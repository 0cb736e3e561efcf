//! Which configuration file is live: its hash, where it came from, when it was loaded (the
//! log and cn=Monitor say it). A leaf: the monitor shows it, a reload makes it.

use sha2::{Digest, Sha256};
use std::time::SystemTime;

/// Which configuration is live: a hash of the file's bytes and when it was loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigIdentity {
    /// `sha256:` and the first 16 hex digits of the SHA-256 of the file.
    pub hash: String,
    pub source: String,
    pub loaded_at: SystemTime,
    /// The keys of the file that differ from what runs and wait for a restart (a reload keeps
    /// their running values); empty at start.
    pub restart_pending: Vec<String>,
}

impl ConfigIdentity {
    /// The identity of config text read from `source` now.
    pub fn of(text: &[u8], source: &str) -> ConfigIdentity {
        let digest = Sha256::digest(text);
        let hex: String = digest[..8]
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect();
        ConfigIdentity {
            hash: format!("sha256:{hex}"),
            source: source.to_string(),
            loaded_at: SystemTime::now(),
            restart_pending: Vec::new(),
        }
    }

    /// `sha256:… from <source> loaded <generalized time>`, as the log and cn=Monitor say it,
    /// then `; waiting for a restart: <keys>` when some of the file does not run yet.
    pub fn describe(&self) -> String {
        let time = lmdir_store::timestamp_value(self.loaded_at);
        let mut text = format!(
            "{} from {} loaded {}",
            self.hash,
            self.source,
            String::from_utf8_lossy(&time)
        );
        if !self.restart_pending.is_empty() {
            text.push_str("; waiting for a restart: ");
            text.push_str(&self.restart_pending.join(", "));
        }
        text
    }
}
