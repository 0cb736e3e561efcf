//! The directives that map to single lmdir settings: anonymous access (`disallow`, `require`),
//! server limits (`writetimeout`, `sockbuf_max_incoming*`, `maxfilterdepth`), `authz-policy`,
//! password policy (`overlay ppolicy` and its `ppolicy_*` flags) and replication (`serverid`,
//! `overlay syncprov`, `syncprov-sessionlog`, `syncrepl`).

use super::{canonical, Translator, CONFIG_BOOKKEEPING, SLAPD_DEFAULTS};
use crate::emit::Consumer;
use crate::{Directive, Location, Note, NoteKind};

/// Most consumers lmdir takes (`[[replication.consumer]]`).
const CONSUMERS_MAX: usize = 64;

/// A boolean directive: slapd.conf's flag form has no argument, cn=config's is TRUE/FALSE.
pub(super) fn flag_on(directive: &Directive) -> bool {
    directive.arguments().first().is_none_or(|value| {
        matches!(
            value.to_ascii_lowercase().as_str(),
            "true" | "on" | "yes" | "1"
        )
    })
}

fn replication_note(directive: String, kind: NoteKind, reason: &str) -> Note {
    Note {
        location: Location {
            file: "(replication)".to_string(),
            line: 0,
        },
        directive,
        kind,
        reason: reason.to_string(),
    }
}

/// The one note about slapd's defaults, the same on every route (a slapd.conf leaves defaults
/// out; cn=config writes many of them).
pub(super) fn defaults_note(hash_cleartext: bool) -> Note {
    let mut reason = "size_limit and time_limit_seconds are written with slapd's values (500 \
                      entries and 3,600 s unless configured) so searches are limited as before; \
                      lmdir's own defaults apply to its resource guards where slapd has none or \
                      larger ones (idle_timeout_seconds 900, write_timeout_seconds 60, \
                      pdu_bytes_max 4 MiB, filter_depth_max 64, lookthrough_limit 100,000)"
        .to_string();
    if !hash_cleartext {
        reason += "; slapd keeps a cleartext userPassword as written (no \
                   ppolicy_hash_cleartext), lmdir hashes it on add and modify unless \
                   [server] password_hash_cleartext = false (for services that read the \
                   cleartext, e.g. CRAM-MD5)";
    }
    Note {
        location: Location {
            file: "(slapd's defaults)".to_string(),
            line: 0,
        },
        directive: "settings left at slapd's default".to_string(),
        kind: NoteKind::Approximated,
        reason,
    }
}

impl<'a> Translator<'a> {
    /// Whether the directive only restates slapd's default (or is cn=config bookkeeping).
    pub(super) fn is_default(&self, directive: &Directive) -> bool {
        let keyword = directive.keyword();
        if CONFIG_BOOKKEEPING.contains(&keyword.as_str()) {
            return true;
        }
        let value = directive.arguments().join(" ");
        SLAPD_DEFAULTS
            .iter()
            .any(|(name, default)| *name == keyword && default.eq_ignore_ascii_case(&value))
    }

    /// `disallow bind_anon ...` (cn=config `olcDisallows`).
    pub(super) fn disallow(&mut self, directive: &Directive) {
        let mut lost = Vec::new();
        for word in directive.arguments() {
            match canonical(word).as_str() {
                "bindanon" => self.draft.disallow_anonymous_bind = true,
                _ => lost.push(word.clone()),
            }
        }
        if !lost.is_empty() {
            self.note(
                directive,
                NoteKind::NotTranslated,
                format!(
                    "{} has no lmdir counterpart (only bind_anon: [server] disallow_anonymous_bind)",
                    lost.join(" ")
                ),
            );
        }
    }

    /// `require authc ...` (cn=config `olcRequires`, in the frontend and each database).
    pub(super) fn require(&mut self, directive: &Directive) {
        let mut lost = Vec::new();
        for word in directive.arguments() {
            match canonical(word).as_str() {
                "authc" => self.draft.require_authentication = true,
                "none" => {}
                _ => lost.push(word.clone()),
            }
        }
        if !lost.is_empty() {
            self.note(
                directive,
                NoteKind::NotTranslated,
                format!(
                    "{} has no lmdir counterpart (only authc: [server] \
                     require_authentication; TLS: require_tls)",
                    lost.join(" ")
                ),
            );
        }
    }

    /// `security <factor>=<ssf> ...` (cn=config `olcSecurity`): slapd refuses what runs below
    /// the strength. Failing open here served cleartext binds and searches a migrated site had
    /// refused, so every factor above 0 that TLS satisfies becomes a TLS requirement (lmdir's
    /// TLS is always stronger than any such factor; ldapi counts as secure in both): `ssf`,
    /// `transport` and `tls` on every operation (`require_tls` and `require_tls_for_reads`),
    /// `simple_bind` and the `update_*` factors on binds and writes (`require_tls`, which
    /// covers both). SASL security layers lmdir has none of: those factors are not translated.
    pub(super) fn security(&mut self, directive: &Directive) {
        let mut lost = Vec::new();
        let mut approximated = Vec::new();
        for word in directive.arguments() {
            let (factor, strength) = word.split_once('=').unwrap_or((word.as_str(), ""));
            let Ok(strength) = strength.trim().parse::<u32>() else {
                lost.push(word.clone());
                continue;
            };
            if strength == 0 {
                continue;
            }
            match canonical(factor).as_str() {
                "ssf" | "transport" | "tls" => {
                    self.draft.require_tls = true;
                    self.draft.require_tls_for_reads = true;
                }
                "simplebind" | "updatessf" | "updatetransport" | "updatetls" => {
                    self.draft.require_tls = true;
                    approximated.push(word.clone());
                }
                _ => lost.push(word.clone()),
            }
        }
        if !approximated.is_empty() {
            self.note(
                directive,
                NoteKind::Approximated,
                format!(
                    "{}: [server] require_tls, which asks TLS before binds and writes alike",
                    approximated.join(" ")
                ),
            );
        }
        if !lost.is_empty() {
            self.note(
                directive,
                NoteKind::NotTranslated,
                format!(
                    "{} has no lmdir counterpart (lmdir has no SASL security layer; TLS: \
                     require_tls, require_tls_for_reads)",
                    lost.join(" ")
                ),
            );
        }
    }

    /// Numeric server settings with a range in lmdir.
    pub(super) fn server_number(&mut self, directive: &Directive) {
        let Some(value) = self.number(directive) else {
            return;
        };
        let keyword = directive.keyword();
        let (key, range, slot) = match keyword.as_str() {
            "writetimeout" => (
                "write_timeout_seconds",
                1..=86_400,
                &mut self.draft.write_timeout_seconds,
            ),
            "sockbufmaxincoming" => (
                "anonymous_pdu_bytes_max",
                1024..=1 << 30,
                &mut self.draft.anonymous_pdu_bytes_max,
            ),
            "sockbufmaxincomingauth" => (
                "pdu_bytes_max",
                1024..=1 << 30,
                &mut self.draft.pdu_bytes_max,
            ),
            _ => (
                "filter_depth_max",
                1..=1000,
                &mut self.draft.filter_depth_max,
            ),
        };
        if range.contains(&value) {
            *slot = Some(value);
        } else {
            let (low, high) = (range.start(), range.end());
            self.note(
                directive,
                NoteKind::NotTranslated,
                format!("[server] {key} takes {low}..={high}; lmdir's default is kept"),
            );
        }
    }

    pub(super) fn authz_policy(&mut self, directive: &Directive) {
        let Some(value) = self.single(directive) else {
            return;
        };
        let lower = value.to_ascii_lowercase();
        if ["none", "to", "from", "any", "all"].contains(&lower.as_str()) {
            self.draft.authz_policy = Some(lower);
        } else {
            self.note(
                directive,
                NoteKind::NotTranslated,
                format!("{value:?} is not none, to, from, any or all"),
            );
        }
    }

    /// `serverid N` or, for multi-provider, `serverid N URL` lines (one per node).
    pub(super) fn server_id(&mut self, directive: &Directive) {
        let arguments = directive.arguments();
        let id = arguments
            .first()
            .and_then(|id| id.parse::<u16>().ok())
            .filter(|id| (1..=4095).contains(id));
        match (id, arguments.len()) {
            (Some(id), 1) => self.draft.replication.server_id = Some(id),
            (Some(id), 2) if self.draft.replication.server_id.is_none() => {
                self.draft.replication.server_id = Some(id);
                self.draft.replication.own_url =
                    Some(arguments[1].trim_end_matches('/').to_string());
                self.note(
                    directive,
                    NoteKind::Approximated,
                    "lmdir's server_id is this server's number alone: the first `serverid N URL` \
                     is used; give each node its own",
                );
            }
            (Some(_), 2) => self.note(
                directive,
                NoteKind::NotNeeded,
                "another node's ID: its own config names it",
            ),
            _ => self.note(
                directive,
                NoteKind::NotTranslated,
                "expected a server ID 1..4095 (and optionally a URL)",
            ),
        }
    }

    /// `syncprov-sessionlog N`.
    pub(super) fn session_log(&mut self, directive: &Directive) {
        match self.number(directive) {
            Some(entries) if entries <= 10_000_000 => {
                self.draft.replication.session_log_entries = Some(entries)
            }
            Some(_) => self.note(
                directive,
                NoteKind::NotTranslated,
                "lmdir keeps at most 10,000,000 session log entries",
            ),
            None => {}
        }
    }

    /// The replication shape as a whole: a multi-provider node's consumer of itself goes, a
    /// provider gets a server_id, a consumer's write referral is compared with lmdir's.
    pub(super) fn finish_replication(&mut self) {
        let replication = &mut self.draft.replication;
        if let Some(own) = &replication.own_url {
            let before = replication.consumers.len();
            replication
                .consumers
                .retain(|consumer| &consumer.provider != own);
            if replication.consumers.len() < before {
                self.notes.push(replication_note(
                    format!("syncrepl provider={own}"),
                    NoteKind::NotNeeded,
                    "this server's own URL (its serverid line): lmdir does not replicate from itself",
                ));
            }
        }
        self.finish_update_referral();
        let replication = &mut self.draft.replication;
        if replication.provider
            && replication.server_id.is_none()
            && !replication.consumers.is_empty()
        {
            // slapd's cascading replica (syncprov on a consumer, no serverID): lmdir's provider
            // with consumers is a writable multi-provider node, not a read-only one.
            replication.provider = false;
            self.notes.push(replication_note(
                "overlay syncprov on a consumer without serverID".to_string(),
                NoteKind::NotTranslated,
                "lmdir cannot be a read-only replica and a provider at once: its consumers \
                 must replicate from this server's provider instead",
            ));
        }
        if replication.provider && replication.server_id.is_none() {
            replication.server_id = Some(1);
            self.notes.push(replication_note(
                "overlay syncprov without serverID".to_string(),
                NoteKind::Approximated,
                "an lmdir provider needs [replication] server_id: 1 is written; give every \
                 server of a replication group its own",
            ));
        }
    }

    /// slapd's `updateref` on a consumer: lmdir's read-only replica refers writes to its first
    /// consumer's provider; slapd without `updateref` refuses them (53).
    fn finish_update_referral(&mut self) {
        let replication = &self.draft.replication;
        let writable = replication.provider && replication.server_id.is_some();
        let read_only = !replication.consumers.is_empty() && !writable;
        let first = replication
            .consumers
            .first()
            .map(|consumer| consumer.provider.clone());
        let note = match (&replication.update_referral, read_only, first) {
            (Some((location, text, url)), true, Some(first)) => {
                let same = url.trim_end_matches('/') == first;
                let (kind, reason) = if same {
                    (NoteKind::NotNeeded, "lmdir's read-only replica refers writes to its first consumer's provider, this URL".to_string())
                } else {
                    (NoteKind::Approximated, format!("lmdir's read-only replica refers writes to its first consumer's provider ({first}), not to this URL"))
                };
                Note { location: location.clone(), directive: text.clone(), kind, reason }
            }
            (Some((location, text, _)), false, _) => Note {
                location: location.clone(),
                directive: text.clone(),
                kind: NoteKind::NotTranslated,
                reason: "not a read-only replica here: lmdir refers writes only as a replica with consumers and no provider of its own".to_string(),
            },
            (None, true, Some(first)) => replication_note(
                "syncrepl without updateref".to_string(),
                NoteKind::Approximated,
                &format!("slapd refuses writes to a consumer without updateref (53); lmdir's read-only replica refers them to {first} (10)"),
            ),
            _ => return,
        };
        self.notes.push(note);
    }

    /// `overlay ppolicy`'s flags, judged once all are read.
    pub(super) fn finish_ppolicy(&mut self) {
        let Some(overlay) = self.ppolicy.overlay else {
            return;
        };
        if let Some(directive) = self.ppolicy.hash_cleartext {
            self.note(
                directive,
                NoteKind::NotNeeded,
                "ppolicy_hash_cleartext is lmdir's default, [server] password_hash_cleartext = \
                 true: a cleartext userPassword is hashed with [server] password_hash on add and \
                 modify",
            );
        }
        if !self.ppolicy.use_lockout {
            self.note(
                overlay,
                NoteKind::Approximated,
                "lmdir tells a client that sends the password policy control that its account \
                 is locked (accountLocked), as slapd does only with ppolicy_use_lockout; the \
                 bind is refused with 49 either way",
            );
        }
    }

    /// `syncrepl rid=... provider=... searchbase=... ...` → a `[[replication.consumer]]`.
    pub(super) fn syncrepl(&mut self, directive: &Directive) {
        let mut consumer = Consumer::default();
        let mut lost = Vec::new();
        for word in directive.arguments() {
            let Some((key, value)) = word.split_once('=') else {
                lost.push(word.clone());
                continue;
            };
            if !consumer_option(&mut consumer, &key.to_ascii_lowercase(), value) {
                lost.push(word.clone());
            }
        }
        let missing: Vec<&str> = [
            ("rid", consumer.rid == 0),
            ("provider", consumer.provider.is_empty()),
            ("searchbase", consumer.search_base.is_empty()),
        ]
        .into_iter()
        .filter_map(|(name, absent)| absent.then_some(name))
        .collect();
        if !missing.is_empty() || self.draft.replication.consumers.len() >= CONSUMERS_MAX {
            self.note(
                directive,
                NoteKind::NotTranslated,
                format!(
                    "needs rid (1..999), provider and searchbase ({} missing or invalid), at most \
                     {CONSUMERS_MAX} consumers",
                    missing.join(", ")
                ),
            );
            return;
        }
        if !lost.is_empty() {
            self.note(
                directive,
                NoteKind::NotTranslated,
                format!(
                    "{} not translated: lmdir's consumer replicates the whole subtree (all \
                     attributes, simple bind)",
                    lost.join(" ")
                ),
            );
        }
        self.draft.replication.consumers.push(consumer);
    }
}

/// One `key=value` of a `syncrepl` line into `consumer`; false when lmdir has no counterpart
/// for that value. Options whose slapd default lmdir's consumer already behaves as are accepted.
fn consumer_option(consumer: &mut Consumer, key: &str, value: &str) -> bool {
    match key {
        "rid" => match value.parse::<u16>() {
            Ok(rid) if (1..=999).contains(&rid) => consumer.rid = rid,
            _ => return false,
        },
        "provider" => consumer.provider = value.trim_end_matches('/').to_string(),
        "searchbase" => consumer.search_base = value.to_string(),
        "type" => match value.to_ascii_lowercase().as_str() {
            "refreshonly" => consumer.refresh_only = true,
            "refreshandpersist" => consumer.refresh_only = false,
            _ => return false,
        },
        "interval" => match interval_seconds(value) {
            Some(seconds) => consumer.interval_seconds = Some(seconds),
            None => return false,
        },
        // `retry="5 5 300 +"`: lmdir retries at one pace: the first interval.
        "retry" => match value.split_whitespace().next().map(str::parse::<u64>) {
            Some(Ok(seconds)) if seconds > 0 => consumer.retry_seconds = Some(seconds),
            _ => return false,
        },
        "bindmethod" => return value.eq_ignore_ascii_case("simple"),
        "binddn" => consumer.bind_dn = value.to_string(),
        "credentials" => consumer.credentials = value.to_string(),
        "starttls" => match value.to_ascii_lowercase().as_str() {
            "yes" | "critical" => consumer.starttls = true,
            "no" => consumer.starttls = false,
            _ => return false,
        },
        "tlscacert" | "tls_cacert" => consumer.tls_ca_certificate = value.to_string(),
        "scope" => return value.eq_ignore_ascii_case("sub"),
        "filter" => return value.eq_ignore_ascii_case("(objectclass=*)"),
        "attrs" => return matches!(value.replace(' ', "").as_str(), "*,+" | "+,*"),
        "schemachecking" => return value.eq_ignore_ascii_case("off"),
        "sizelimit" | "timelimit" => return value.eq_ignore_ascii_case("unlimited"),
        // Connection tuning lmdir's consumer does itself.
        "keepalive" | "timeout" | "network-timeout" | "tls_reqcert" => {}
        _ => return false,
    }
    true
}

/// `dd:hh:mm:ss` (or plain seconds) → seconds.
fn interval_seconds(text: &str) -> Option<u64> {
    let parts: Vec<u64> = text
        .split(':')
        .map(|part| part.parse().ok())
        .collect::<Option<_>>()?;
    let seconds = match parts.as_slice() {
        [seconds] => *seconds,
        [days, hours, minutes, seconds] => ((days * 24 + hours) * 60 + minutes) * 60 + seconds,
        _ => return None,
    };
    (1..=31_622_400).contains(&seconds).then_some(seconds)
}
