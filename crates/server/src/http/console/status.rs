//! The status page: readiness (the reasons `/readyz` gives), replication consumers, operation
//! counts and a small inline SVG chart of operations per second, from the samples
//! `Rates::sample` takes every `SAMPLE_INTERVAL`.

use super::{escape, page, Notice, Signed};
use crate::http::{HttpResponse, HttpState};
use crate::identity::Identity;
use crate::monitor::OperationKind;
use std::collections::VecDeque;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub const SAMPLE_INTERVAL: Duration = Duration::from_secs(5);
/// Samples kept: ten minutes.
const SAMPLES_MAX: usize = 120;

/// Completed operations over time.
#[derive(Default)]
pub struct Rates {
    samples: Mutex<VecDeque<(Instant, u64)>>,
}

impl Rates {
    pub fn sample(&self, monitor: &crate::monitor::Monitor) {
        let completed: u64 = OperationKind::ALL
            .iter()
            .map(|kind| monitor.operation_counts(*kind).1)
            .sum();
        let mut samples = self
            .samples
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if samples.len() == SAMPLES_MAX {
            samples.pop_front();
        }
        samples.push_back((Instant::now(), completed));
    }

    /// Operations per second between consecutive samples, oldest first.
    fn per_second(&self) -> Vec<f64> {
        let samples = self
            .samples
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        samples
            .iter()
            .zip(samples.iter().skip(1))
            .map(|((before, count_before), (after, count_after))| {
                let seconds = after.duration_since(*before).as_secs_f64().max(0.001);
                count_after.saturating_sub(*count_before) as f64 / seconds
            })
            .collect()
    }
}

fn chart(rates: &[f64]) -> String {
    let (width, height) = (600.0, 120.0);
    let top = rates.iter().cloned().fold(1.0f64, f64::max);
    let step = width / (SAMPLES_MAX as f64 - 1.0);
    let points: Vec<String> = rates
        .iter()
        .enumerate()
        .map(|(index, rate)| {
            format!(
                "{:.1},{:.1}",
                index as f64 * step,
                height - rate / top * (height - 10.0)
            )
        })
        .collect();
    format!(
        "<svg id=\"rates\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" role=\"img\" \
         aria-label=\"operations per second\"><polyline fill=\"none\" stroke=\"#2c5282\" stroke-width=\"2\" points=\"{}\"/>\
         <text x=\"4\" y=\"14\" font-size=\"12\">{top:.1} ops/s</text></svg>",
        points.join(" ")
    )
}

/// Whether `identity` may see the server's state: whom cn=Monitor is open to (the rootdn, or
/// a rule naming cn=Monitor), since the page shows what cn=Monitor holds.
pub fn may_see_status(server: &crate::context::ServerContext, identity: &Identity) -> bool {
    if identity.is_rootdn {
        return true;
    }
    crate::context::database_of(server).is_some_and(|database| {
        database
            .may_read_below(identity, lmdir_access::acl::MONITOR_NDN)
            .unwrap_or(false)
    })
}

pub fn status(state: &HttpState, signed: &Signed) -> HttpResponse {
    let server = &state.server;
    // Replication URLs and errors, connection and session counts: cn=Monitor's, not everyone's.
    if !may_see_status(server, signed.client.identity()) {
        return page(
            "Not found",
            Some(signed),
            Notice::error("No such page.").as_ref(),
            "",
        );
    }
    state.rates.sample(&server.monitor);
    let reasons = crate::health::not_ready_reasons(server);
    let mut body = format!(
        "<h2>Health</h2><p id=\"health\">{}</p>",
        if reasons.is_empty() {
            "Ready".to_string()
        } else {
            escape(&reasons.join("; "))
        }
    );
    let _ = write!(
        body,
        "<p>{} LDAP connections, {} console sessions, up {} s</p>",
        server.active_connections(),
        state.console.count(),
        server.started.elapsed().as_secs()
    );
    body.push_str("<h2>Replication</h2>");
    let consumers = server.monitor.replication.consumers();
    if consumers.is_empty() {
        body.push_str("<p>This server pulls from no provider.</p>");
    }
    for consumer in consumers {
        let state = consumer.snapshot();
        let _ = write!(
            body,
            "<p>rid {} from {}: {:?}{}</p>",
            consumer.identity.rid,
            escape(&consumer.identity.provider),
            state.phase,
            if state.last_error.is_empty() {
                String::new()
            } else {
                format!(", last error: {}", escape(&state.last_error))
            }
        );
    }
    body.push_str("<h2>Operations per second</h2>");
    body.push_str(&chart(&state.rates.per_second()));
    body.push_str("<table><tr><th>operation</th><th>completed</th></tr>");
    for kind in OperationKind::ALL {
        let _ = write!(
            body,
            "<tr><td>{}</td><td>{}</td></tr>",
            kind.label(),
            server.monitor.operation_counts(kind).1
        );
    }
    body.push_str("</table>");
    page("Status", Some(signed), None, &body)
}
