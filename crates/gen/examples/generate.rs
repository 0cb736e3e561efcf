//! Writes a synthetic directory to stdout: `cargo run --release -p lmdir-gen --example generate -- PEOPLE [SEED]`.

use std::io::Write;

fn main() {
    let mut arguments = std::env::args().skip(1);
    let people = arguments.next().and_then(|text| text.parse().ok());
    let seed = arguments.next().map_or(Some(1), |text| text.parse().ok());
    let (Some(people), Some(seed)) = (people, seed) else {
        eprintln!("usage: generate PEOPLE [SEED]");
        std::process::exit(2);
    };
    let stdout = std::io::stdout();
    let mut lock = stdout.lock();
    match lmdir_gen::generate(people, seed, &mut lock) {
        Ok(summary) => {
            let _ = lock.flush();
            eprintln!("{summary:?}");
        }
        Err(error) => {
            eprintln!("generate: {error}");
            std::process::exit(1);
        }
    }
}
