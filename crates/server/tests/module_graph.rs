//! The module graphs of lmdir-server and lmdir-store have no cycle (ARCHITECTURE.md: each
//! module imports only from the layers below it). A module is a file or directory directly
//! under `src/`; a reference is `crate::name` (also inside `use crate::{...}` groups) outside
//! the file's unit tests. On a cycle the test names its modules and, for each, what it imports
//! from the others.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Graph = BTreeMap<String, BTreeSet<String>>;

/// Source files under `dir`, recursively.
fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("reading a source directory") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            found.push(path);
        }
    }
}

/// The top-level module a file under `src` belongs to; None for lib.rs and main.rs.
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(src).expect("a file under src");
    let first = relative.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (name != "lib" && name != "main").then(|| name.to_string())
}

/// The text of a file without its unit tests (`#[cfg(test)]` and what follows it).
fn without_tests(text: &str) -> &str {
    text.find("#[cfg(test)]").map_or(text, |at| &text[..at])
}

fn identifier_at(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

/// Every module `text` names as `crate::name` or inside `crate::{name, other::item}`.
fn referenced_modules(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (at, _) in text.match_indices("crate::") {
        let rest = &text[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let group = &group[..group.find('}').unwrap_or(group.len())];
            for item in group.split(',') {
                let name = identifier_at(item.trim());
                if !name.is_empty() && name != "self" {
                    names.insert(name.to_string());
                }
            }
        } else {
            let name = identifier_at(rest);
            if !name.is_empty() {
                names.insert(name.to_string());
            }
        }
    }
    names
}

fn module_graph(crate_dir: &str) -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(crate_dir)
        .join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut graph = Graph::new();
    for file in &files {
        if let Some(module) = module_of(&src, file) {
            graph.entry(module).or_default();
        }
    }
    for file in &files {
        let Some(module) = module_of(&src, file) else {
            continue;
        };
        let text = std::fs::read_to_string(file).expect("reading a source file");
        let references = referenced_modules(without_tests(&text));
        let known: BTreeSet<String> = references
            .into_iter()
            .filter(|name| *name != module && graph.contains_key(name))
            .collect();
        graph.get_mut(&module).expect("listed").extend(known);
    }
    graph
}

/// Strongly connected components of more than one module (Tarjan).
fn cycles(graph: &Graph) -> Vec<Vec<String>> {
    struct Walk<'g> {
        graph: &'g Graph,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        found: Vec<Vec<String>>,
    }
    impl<'g> Walk<'g> {
        fn visit(&mut self, module: &'g str) {
            let number = self.index.len();
            self.index.insert(module, number);
            self.low.insert(module, number);
            self.stack.push(module);
            self.on_stack.insert(module);
            for next in &self.graph[module] {
                let next = next.as_str();
                if !self.index.contains_key(next) {
                    self.visit(next);
                    let low = self.low[module].min(self.low[next]);
                    self.low.insert(module, low);
                } else if self.on_stack.contains(next) {
                    let low = self.low[module].min(self.index[next]);
                    self.low.insert(module, low);
                }
            }
            if self.low[module] == self.index[module] {
                let mut component = Vec::new();
                while let Some(member) = self.stack.pop() {
                    self.on_stack.remove(member);
                    component.push(member.to_string());
                    if member == module {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for module in graph.keys() {
        if !walk.index.contains_key(module.as_str()) {
            walk.visit(module);
        }
    }
    walk.found
}

fn describe(graph: &Graph, component: &[String]) -> String {
    component
        .iter()
        .map(|module| {
            let inside: Vec<&str> = graph[module]
                .iter()
                .filter(|next| component.contains(next))
                .map(String::as_str)
                .collect();
            format!("  {module} -> {}", inside.join(", "))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn assert_acyclic(crate_dir: &str) {
    let graph = module_graph(crate_dir);
    assert!(graph.len() > 10, "{crate_dir}: modules found: {graph:?}");
    let found = cycles(&graph);
    let report: Vec<String> = found.iter().map(|c| describe(&graph, c)).collect();
    assert!(
        found.is_empty(),
        "{crate_dir}: import cycles between modules:\n{}",
        report.join("\n\n")
    );
}

#[test]
fn the_server_modules_import_only_downward() {
    assert_acyclic("server");
}

#[test]
fn a_cycle_is_found_and_named() {
    let mut graph = Graph::new();
    for (module, imports) in [
        ("a", &["b"][..]),
        ("b", &["c"]),
        ("c", &["a"]),
        ("d", &["a"]),
    ] {
        graph.insert(
            module.to_string(),
            imports.iter().map(|name| name.to_string()).collect(),
        );
    }
    assert_eq!(cycles(&graph), vec![vec!["a", "b", "c"]]);
    assert_eq!(
        referenced_modules("use crate::{x::Y, z};\nlet q = crate::w::f();"),
        BTreeSet::from(["w".to_string(), "x".to_string(), "z".to_string()])
    );
}
