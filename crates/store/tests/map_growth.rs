//! The map grows by itself: a store opened with a tiny map takes far more data than the map
//! first held, with read txns opening and closing (and one held across writes on another
//! thread) along the way.

use crate::common;

use common::*;
use lmdir_store::Store;

#[test]
fn writes_grow_a_tiny_map() {
    let temporary = tempfile::tempdir().unwrap();
    let mut options = options();
    let initial_map_bytes = 1 << 20;
    options.map_size_bytes = initial_map_bytes;
    let store = Store::open(temporary.path(), options, schema()).unwrap();
    let entries = directory(1_500);
    let context = context();
    // A reader on another thread that holds its txn briefly, repeatedly, while writes go on.
    let reader_store = store.clone();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader_stop = stop.clone();
    let reader = std::thread::spawn(move || {
        let mut reads = 0u64;
        while !reader_stop.load(std::sync::atomic::Ordering::Relaxed) {
            let read = reader_store.read().unwrap();
            reads += read.entry_count().unwrap();
            drop(read);
            std::thread::yield_now();
        }
        reads
    });
    for chunk in entries.chunks(50) {
        let mut write = store.write().unwrap();
        for entry in chunk {
            write.add(entry, &context).unwrap();
        }
        write.commit().unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    reader.join().unwrap();
    assert!(store.env().info().map_size > initial_map_bytes);
    assert_eq!(
        store.read().unwrap().entry_count().unwrap(),
        entries.len() as u64
    );
    assert!(store.check().unwrap().is_clean());
}
