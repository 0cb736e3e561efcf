//! Prints how fast values normalize (run with `cargo run --release -p lmdir-schema --example
//! normalize_throughput`): the loader's per-value cost.

use std::time::Instant;

use lmdir_schema::Schema;

/// Makes the i-th test value of one attribute.
type ValueMaker = Box<dyn Fn(usize) -> String>;

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
        let mut total_bytes = 0usize;
        for value in &values {
            total_bytes += schema
                .normalize_value(attr, value.as_bytes())
                .expect("valid value")
                .len();
        }
        let elapsed = started.elapsed();
        println!(
            "{attribute_name:>16}: {:>6.0} ns/value, {:>5.1} M values/s ({total_bytes} normalized bytes)",
            elapsed.as_nanos() as f64 / value_count as f64,
            value_count as f64 / elapsed.as_secs_f64() / 1e6
        );
    }
}
