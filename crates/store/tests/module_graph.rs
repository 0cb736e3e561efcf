//! The layering of crates/store (issue 21): no two modules of the crate may reach each other
//! through `crate::` references, directly or round a longer loop. The same reading of
//! crates/server must find no cycle at all.
//!
//! A module is a file or a directory directly under `src/` (a directory's files all count as
//! that module). A reference is `crate::a` or `crate::a::b` (to `a`), an item of a `use
//! crate::{a, b::c}` group (to `a` and `b`), or `crate::Item` where lib.rs re-exports `Item`
//! from module `a` (to `a`). Unit-test modules (`#[cfg(test)] mod ...` to the end of a file)
//! are left out: a test may use any part of its crate.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Graph = BTreeMap<String, BTreeSet<String>>;

fn rust_files_under(path: &Path, files: &mut Vec<PathBuf>) {
    if path.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
            .expect("read a source directory")
            .map(|entry| entry.expect("read a directory entry").path())
            .collect();
        entries.sort();
        for entry in entries {
            rust_files_under(&entry, files);
        }
    } else if path.extension().is_some_and(|extension| extension == "rs") {
        files.push(path.to_path_buf());
    }
}

/// The text of a file without its unit-test module.
fn source_without_tests(path: &Path) -> String {
    let text = std::fs::read_to_string(path).expect("read a source file");
    match text.find("#[cfg(test)]\nmod ") {
        Some(cut) => text[..cut].to_string(),
        None => text,
    }
}

fn identifier_at(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

/// The first identifiers of the items of a `{ ... }` group (`text` starts after the `{`).
fn group_heads(text: &str) -> Vec<&str> {
    let mut heads = Vec::new();
    let mut depth = 0usize;
    let mut expecting_head = true;
    for (offset, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => expecting_head = true,
            c if expecting_head && depth == 0 && (c.is_ascii_alphabetic() || c == '_') => {
                heads.push(identifier_at(&text[offset..]));
                expecting_head = false;
            }
            _ => {}
        }
    }
    heads
}

/// Every name a text reaches through `crate::`.
fn crate_references(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (offset, _) in text.match_indices("crate::") {
        let rest = &text[offset + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            names.extend(group_heads(group).into_iter().map(str::to_string));
        } else {
            let name = identifier_at(rest);
            if !name.is_empty() {
                names.insert(name.to_string());
            }
        }
    }
    names
}

/// Item name → module, from lib.rs's `pub use module::{...}` / `pub use module::Item`.
fn re_exports(lib: &str) -> BTreeMap<String, String> {
    let mut items = BTreeMap::new();
    for (offset, _) in lib.match_indices("pub use ") {
        let rest = &lib[offset + "pub use ".len()..];
        let module = identifier_at(rest);
        let after = &rest[module.len()..];
        let Some(path) = after.strip_prefix("::") else {
            continue;
        };
        let names = match path.strip_prefix('{') {
            Some(group) => group_heads(group),
            None => vec![identifier_at(path)],
        };
        for name in names {
            items.insert(name.to_string(), module.to_string());
        }
    }
    items
}

/// The module graph of the crate whose sources are in `src`.
fn module_graph(src: &Path) -> Graph {
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("read lib.rs");
    let exports = re_exports(&lib);
    let mut modules: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    for entry in std::fs::read_dir(src).expect("read src") {
        let path = entry.expect("read src entry").path();
        let Some(stem) = path.file_stem().and_then(|stem| stem.to_str()) else {
            continue;
        };
        if stem == "lib" || stem == "main" {
            continue;
        }
        let mut files = Vec::new();
        rust_files_under(&path, &mut files);
        modules.entry(stem.to_string()).or_default().extend(files);
    }
    let mut graph = Graph::new();
    for (module, files) in &modules {
        let mut targets = BTreeSet::new();
        for file in files {
            for name in crate_references(&source_without_tests(file)) {
                let target = if modules.contains_key(&name) {
                    Some(name)
                } else {
                    exports.get(&name).cloned()
                };
                targets.extend(target.filter(|target| target != module));
            }
        }
        graph.insert(module.clone(), targets);
    }
    graph
}

fn reachable(graph: &Graph, start: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut stack = vec![start.to_string()];
    while let Some(node) = stack.pop() {
        for next in graph.get(&node).into_iter().flatten() {
            if seen.insert(next.clone()) {
                stack.push(next.clone());
            }
        }
    }
    seen
}

/// The strongly connected sets of more than one module: each is one or more cycles.
fn cyclic_groups(graph: &Graph) -> Vec<BTreeSet<String>> {
    let reach: BTreeMap<&String, BTreeSet<String>> = graph
        .keys()
        .map(|node| (node, reachable(graph, node)))
        .collect();
    let mut groups: Vec<BTreeSet<String>> = Vec::new();
    for (node, reached) in &reach {
        if !reached.contains(*node) || groups.iter().any(|group| group.contains(*node)) {
            continue;
        }
        let group: BTreeSet<String> = reached
            .iter()
            .filter(|other| reach[other].contains(*node))
            .cloned()
            .collect();
        groups.push(group);
    }
    groups
}

/// One shortest cycle through `start` inside `group`, as `a -> b -> ... -> a`.
fn cycle_through(graph: &Graph, group: &BTreeSet<String>, start: &str) -> String {
    let mut previous: BTreeMap<String, String> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start.to_string()]);
    while let Some(node) = queue.pop_front() {
        for next in graph[&node].iter().filter(|next| group.contains(*next)) {
            if next == start {
                let mut path = vec![start.to_string(), node.clone()];
                let mut at = node.clone();
                while let Some(before) = previous.get(&at) {
                    path.push(before.clone());
                    at = before.clone();
                }
                path.reverse();
                return path.join(" -> ");
            }
            if !previous.contains_key(next) && next != start {
                previous.insert(next.clone(), node.clone());
                queue.push_back(next.clone());
            }
        }
    }
    unreachable!("{start} is in a cyclic group, so a cycle runs through it")
}

fn describe_cycles(crate_name: &str, graph: &Graph) -> Vec<String> {
    cyclic_groups(graph)
        .iter()
        .map(|group| {
            let first = group.iter().next().expect("a group is not empty");
            format!(
                "{crate_name}: modules {:?} form a cycle, e.g. {}",
                group,
                cycle_through(graph, group, first)
            )
        })
        .collect()
}

fn crate_src(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(name)
        .join("src")
}

#[test]
fn the_store_modules_import_only_downward() {
    let graph = module_graph(&crate_src("store"));
    assert!(
        graph.len() > 20,
        "the store's modules were found: {graph:?}"
    );
    let cycles = describe_cycles("lmdir-store", &graph);
    assert!(cycles.is_empty(), "{}", cycles.join("\n"));
}

#[test]
fn the_server_modules_import_only_downward() {
    let graph = module_graph(&crate_src("server"));
    assert!(
        graph.len() > 20,
        "the server's modules were found: {graph:?}"
    );
    let cycles = describe_cycles("lmdir-server", &graph);
    assert!(cycles.is_empty(), "{}", cycles.join("\n"));
}

/// The reading itself: a planted loop is found, and a layered graph passes.
#[test]
fn the_reader_finds_a_planted_cycle() {
    let text = "use crate::{a::X, b};\nfn f() { crate::c::g(); crate::Thing::new(); }\n#[cfg(test)]\nmod tests { use crate::d; }";
    let cut = match text.find("#[cfg(test)]\nmod ") {
        Some(cut) => &text[..cut],
        None => text,
    };
    let names = crate_references(cut);
    let expected: BTreeSet<String> = ["a", "b", "c", "Thing"].map(String::from).into();
    assert_eq!(names, expected);
    let exports = re_exports("pub use c::{Thing, Other};\npub use a::X;\n");
    assert_eq!(exports["Thing"], "c");
    assert_eq!(exports["X"], "a");
    let mut graph = Graph::new();
    graph.insert("a".into(), ["b".to_string()].into());
    graph.insert("b".into(), ["c".to_string()].into());
    graph.insert("c".into(), BTreeSet::new());
    assert!(describe_cycles("t", &graph).is_empty());
    graph.get_mut("c").unwrap().insert("a".into());
    let cycles = describe_cycles("t", &graph);
    assert_eq!(cycles.len(), 1);
    assert!(cycles[0].contains("a -> b -> c -> a"), "{cycles:?}");
}
