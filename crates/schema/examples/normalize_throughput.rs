//! Prints how fast values normalize (run with `cargo run --release -p lmdir-schema --example
//! normalize_throughput`): the loader's per-value cost. Reports this thread's CPU time (from
//! /proc/thread-self/schedstat when available), which stays meaningful on a busy shared machine,
//! next to wall time.

use std::time::{Duration, Instant};

use lmdir_schema::Schema;

/// Makes the i-th test value of one attribute.
type ValueMaker = Box<dyn Fn(usize) -> String>;

/// CPU time this thread has run, if the kernel tells: schedstat (nanoseconds) when it counts,
/// else utime + stime from stat (clock ticks, assumed 100 per second).
fn thread_cpu_time() -> Option<Duration> {
    if let Ok(text) = std::fs::read_to_string("/proc/thread-self/schedstat") {
        let nanoseconds: u64 = text.split_whitespace().next()?.parse().ok()?;
        if nanoseconds > 0 {
            return Some(Duration::from_nanos(nanoseconds));
        }
    }
    let text = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    // Fields after the parenthesized command name: state is field 3, utime 14, stime 15.
    let after_name = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

fn main() {
    let schema = Schema::builtin();
    let value_count = 1_000_000;
    let cases: [(&str, ValueMaker); 6] = [
        (
            "cn (ASCII)",
            Box::new(|index| format!("User Number {index}")),
        ),
        (
            "cn (Unicode)",
            Box::new(|index| format!("Łukasz Żółć {index}")),
        ),
        (
            "mail",
            Box::new(|index| format!("User.{index}@Example.COM")),
        ),
        ("uidNumber", Box::new(|index| format!("{}", index * 7))),
        (
            "member",
            Box::new(|index| format!("uid=user{index},ou=People,dc=example,dc=com")),
        ),
        (
            "createTimestamp",
            Box::new(|index| format!("2026{:02}15120000Z", index % 12 + 1)),
        ),
    ];
    for (attribute_name, make_value) in cases {
        let attribute_name_only = attribute_name.split(' ').next().expect("non-empty");
        let attr = schema
            .attribute(attribute_name_only)
            .expect("built-in attribute");
        let values: Vec<String> = (0..value_count).map(&make_value).collect();
        let started = Instant::now();
        let cpu_started = thread_cpu_time();
        let mut total_bytes = 0usize;
        for value in &values {
            total_bytes += schema
                .normalize_value(attr, value.as_bytes())
                .expect("valid value")
                .len();
        }
        let elapsed = started.elapsed();
        let cpu = match (cpu_started, thread_cpu_time()) {
            (Some(before), Some(after)) => format!(
                "{:>6.0} ns/value CPU",
                (after - before).as_nanos() as f64 / value_count as f64
            ),
            _ => "CPU time unavailable".to_string(),
        };
        println!(
            "{attribute_name:>16}: {cpu}, {:>6.0} ns/value wall ({total_bytes} normalized bytes)",
            elapsed.as_nanos() as f64 / value_count as f64,
        );
    }
}
