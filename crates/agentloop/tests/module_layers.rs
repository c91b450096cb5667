//! The crate's modules form layers: a module imports only what lies below it, and no two
//! modules import each other, directly or round a loop (`docs/ARCHITECTURE.md`, "The layers").
//!
//! This test reads the library's source as the compiler sees it: the module tree from
//! `src/lib.rs` down, and in every module the paths of the crate it names — `use` items,
//! `crate::…`, `super::…` and `self::…` paths in code, in macro calls and in serde attributes
//! (`serialize_with = "crate::…"`), names re-exported at the crate root (`crate::Agent`) taken
//! to where they come from. Doc comments are not imports. Test code (`#[cfg(test)]` items and
//! modules, hence every `tests.rs`) may import anything and is not read.
//!
//! From those paths it builds, for every module, the graph between its submodules (the crate's
//! top-level modules, `provider`'s wire formats, `run`'s parts, …): `a -> b` when code in `a`
//! names something inside `b`. Then:
//! - no graph has a cycle (each is named with the lines that close it);
//! - the top-level modules keep to [`LAYERS`]: a module imports only modules of lower layers.
//!
//! A new top-level module must be given its layer here.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use proc_macro2::{Span, TokenStream, TokenTree};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use syn::visit::Visit;

/// The top-level modules of the crate, layer by layer from the bottom up. A module may import
/// modules of the layers below its own, never one of its own layer or above.
const LAYERS: &[&[&str]] = &[
    // values: canonical JSON; the cancel / pause cell of a run; the external crates that
    // `#[tool]`'s expansions name (`__private`); the HTTP clients' TLS
    &["__private", "canonical", "control", "tls"],
    // messages and their parts
    &["message"],
    // the `Tool` trait, schemas, the executor, MCP
    &["tool"],
    // the context window; the `Provider` trait and the wire formats
    &["context", "provider"],
    // what a run is given and what it ends with: `RunConfig`, limits, `Outcome`, `StopReason`
    &["terms"],
    // `Event`
    &["event"],
    // observers of a run's events (telemetry)
    &["observe"],
    // `Run`, the sans-IO machine
    &["run"],
    &["hooks"],
    // the async driver and its `EventStream`
    &["driver"],
    // journals, leases, sessions, artifacts
    &["store"],
    // the envelope that carries events out of the process
    &["protocol"],
    // the agent API's errors; the JSON Schemas; the run service
    &["error", "schema", "service"],
    &["agent"],
    &["session"],
    // the worker pool: a queue in Redis Streams, workers that execute runs from it
    &["worker"],
    // the names most programs import
    &["prelude"],
];

/// A module's path from the crate root (`["provider", "anthropic", "decode"]`).
type ModPath = Vec<String>;

/// Where a module names another: the file, the line and the path as written.
#[derive(Debug, Clone)]
struct Site {
    file: String,
    line: usize,
    path: String,
}

impl std::fmt::Display for Site {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{} `{}`", self.file, self.line, self.path)
    }
}

/// For each module, the arrows between its submodules (by name), each with where it is made.
type Graphs = BTreeMap<ModPath, BTreeMap<String, BTreeMap<String, Vec<Site>>>>;

/// One library module, its source and the file it is in.
struct Module {
    path: ModPath,
    file: PathBuf,
    items: Vec<syn::Item>,
}

/// The library as read: its modules and the graphs between them.
struct Library {
    root: PathBuf,
    modules: Vec<Module>,
    known: BTreeSet<ModPath>,
    /// Names the crate root re-exports (`Agent` → `agent::Agent`).
    root_exports: BTreeMap<String, ModPath>,
}

impl Library {
    /// Reads the module tree from `src/lib.rs` under `root` (a crate's directory).
    fn read(root: &Path) -> Self {
        let lib = root.join("src/lib.rs");
        let mut library = Self {
            root: root.to_path_buf(),
            modules: Vec::new(),
            known: BTreeSet::new(),
            root_exports: BTreeMap::new(),
        };
        let items = parse(&lib).items;
        library.add(Vec::new(), &lib, root.join("src"), items);
        library.root_exports = library.exports_of_root();
        library
    }

    /// Adds a module and, recursively, its library submodules (test-only ones are left out).
    fn add(&mut self, path: ModPath, file: &Path, dir: PathBuf, items: Vec<syn::Item>) {
        for item in &items {
            let syn::Item::Mod(module) = item else { continue };
            if test_only(&module.attrs) {
                continue;
            }
            assert!(
                !module.attrs.iter().any(|a| a.path().is_ident("path")),
                "{}: `#[path]` modules are not supported by this test",
                file.display()
            );
            let name = module.ident.to_string();
            let mut child = path.clone();
            child.push(name.clone());
            match &module.content {
                Some((_, inner)) => self.add(child, file, dir.join(&name), inner.clone()),
                None => {
                    let flat = dir.join(format!("{name}.rs"));
                    let (child_file, child_dir) = if flat.exists() {
                        (flat, dir.join(&name))
                    } else {
                        (dir.join(&name).join("mod.rs"), dir.join(&name))
                    };
                    let inner = parse(&child_file).items;
                    self.add(child, &child_file, child_dir, inner);
                }
            }
        }
        self.known.insert(path.clone());
        self.modules.push(Module { path, file: file.to_path_buf(), items });
    }

    /// The crate root's `use` items: name → the path it stands for.
    fn exports_of_root(&self) -> BTreeMap<String, ModPath> {
        let mut exports = BTreeMap::new();
        let Some(root) = self.modules.iter().find(|m| m.path.is_empty()) else { return exports };
        let mut reader = Reader::new(self, root);
        for item in &root.items {
            if let syn::Item::Use(item) = item {
                if !test_only(&item.attrs) {
                    reader.visit_item_use(item);
                }
            }
        }
        for (name, target) in reader.uses {
            if target.first().is_some_and(|first| self.known.contains(&vec![first.clone()])) {
                exports.insert(name, target);
            }
        }
        exports
    }

    /// The arrows between sibling modules, at every level of the tree.
    fn graphs(&self) -> Graphs {
        let mut graphs = Graphs::new();
        for module in &self.modules {
            let mut reader = Reader::new(self, module);
            for item in &module.items {
                reader.visit_item(item);
            }
            for (target, site) in reader.references {
                let common = module.path.iter().zip(&target).take_while(|(a, b)| a == b).count();
                if common == module.path.len() || common == target.len() {
                    continue; // a module naming its own descendants or ancestors
                }
                let parent = target[..common].to_vec();
                let mut sibling = parent.clone();
                sibling.push(target[common].clone());
                if !self.known.contains(&sibling) {
                    continue; // an item of the common ancestor (`super::Phase`)
                }
                graphs
                    .entry(parent)
                    .or_default()
                    .entry(module.path[common].clone())
                    .or_default()
                    .entry(target[common].clone())
                    .or_default()
                    .push(site);
            }
        }
        graphs
    }
}

fn parse(file: &Path) -> syn::File {
    let text = std::fs::read_to_string(file)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
    syn::parse_file(&text).unwrap_or_else(|e| panic!("cannot parse {}: {e}", file.display()))
}

/// Whether a `#[cfg(…)]` among `attrs` keeps the item to test builds.
fn test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg")
            && attr.parse_args::<syn::Meta>().is_ok_and(|meta| needs_test(&meta))
    })
}

/// Whether a cfg predicate holds only under `test`.
fn needs_test(meta: &syn::Meta) -> bool {
    type Metas = syn::punctuated::Punctuated<syn::Meta, syn::Token![,]>;
    match meta {
        syn::Meta::Path(path) => path.is_ident("test"),
        syn::Meta::List(list) => {
            let Ok(inner) = list.parse_args_with(Metas::parse_terminated) else { return false };
            if list.path.is_ident("all") {
                inner.iter().any(needs_test)
            } else if list.path.is_ident("any") {
                !inner.is_empty() && inner.iter().all(needs_test)
            } else {
                false
            }
        }
        syn::Meta::NameValue(_) => false,
    }
}

/// Collects the crate paths that one module's code names.
struct Reader<'a> {
    library: &'a Library,
    module: &'a ModPath,
    file: String,
    /// Resolved paths named, with where.
    references: Vec<(ModPath, Site)>,
    /// `use` items: the name brought in and the path it stands for.
    uses: Vec<(String, ModPath)>,
}

impl<'a> Reader<'a> {
    fn new(library: &'a Library, module: &'a Module) -> Self {
        let file = module.file.strip_prefix(&library.root).unwrap_or(&module.file);
        Self {
            library,
            module: &module.path,
            file: file.display().to_string(),
            references: Vec::new(),
            uses: Vec::new(),
        }
    }

    /// The absolute path `segments` stands for in this module, if it is one of the crate's.
    fn resolve(&self, segments: &[String], in_use: bool) -> Option<ModPath> {
        let first = segments.first()?;
        let (mut base, rest) = match first.as_str() {
            "crate" | "agentloop" => (Vec::new(), &segments[1..]),
            "self" => (self.module.clone(), &segments[1..]),
            "super" => {
                let mut base = self.module.clone();
                let mut rest = segments;
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop()?;
                    rest = &rest[1..];
                }
                (base, rest)
            }
            // A submodule's name starts a relative path (`breaker::call_key`); a lone name
            // outside `use` is a local, not a module.
            name => {
                let mut child = self.module.clone();
                child.push(name.to_owned());
                if !self.library.known.contains(&child) || (!in_use && segments.len() < 2) {
                    return None;
                }
                (self.module.clone(), segments)
            }
        };
        base.extend(rest.iter().filter(|s| *s != "self").cloned());
        if let Some(first) = base.first() {
            if !self.library.known.contains(&vec![first.clone()]) {
                let target = self.library.root_exports.get(first)?;
                base.splice(..1, target.iter().cloned());
            }
        }
        Some(base)
    }

    fn note(&mut self, segments: &[String], span: Span, in_use: bool) -> Option<ModPath> {
        let target = self.resolve(segments, in_use)?;
        let site =
            Site { file: self.file.clone(), line: span.start().line, path: segments.join("::") };
        self.references.push((target.clone(), site));
        Some(target)
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        let leaf = |reader: &mut Self, prefix: &mut Vec<String>, name: String, span: Span| {
            if let Some(target) = reader.note(prefix, span, true) {
                reader.uses.push((name, target));
            }
        };
        match tree {
            syn::UseTree::Path(path) => {
                prefix.push(path.ident.to_string());
                self.use_tree(prefix, &path.tree);
                prefix.pop();
            }
            syn::UseTree::Name(name) => {
                prefix.push(name.ident.to_string());
                let alias = match name.ident.to_string().as_str() {
                    "self" => prefix.iter().rev().nth(1).cloned().unwrap_or_default(),
                    other => other.to_owned(),
                };
                leaf(self, prefix, alias, name.ident.span());
                prefix.pop();
            }
            syn::UseTree::Rename(rename) => {
                prefix.push(rename.ident.to_string());
                leaf(self, prefix, rename.rename.to_string(), rename.ident.span());
                prefix.pop();
            }
            syn::UseTree::Glob(glob) => {
                let span = glob.star_token.span;
                self.note(prefix, span, true);
            }
            syn::UseTree::Group(group) => {
                for tree in &group.items {
                    self.use_tree(prefix, tree);
                }
            }
        }
    }

    /// Paths in a token stream (a macro call's arguments): `crate :: a :: b`, `super :: x`.
    fn tokens(&mut self, tokens: TokenStream) {
        let tokens: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < tokens.len() {
            if let TokenTree::Group(group) = &tokens[i] {
                self.tokens(group.stream());
            }
            let start = matches!(&tokens[i], TokenTree::Ident(id) if id == "crate" || id == "super")
                && !matches!(i.checked_sub(1).map(|p| &tokens[p]), Some(TokenTree::Punct(p)) if p.as_char() == '$');
            if !start {
                i += 1;
                continue;
            }
            let span = tokens[i].span();
            let mut segments = vec![tokens[i].to_string()];
            let mut j = i + 1;
            while let (
                Some(TokenTree::Punct(a)),
                Some(TokenTree::Punct(b)),
                Some(TokenTree::Ident(id)),
            ) = (tokens.get(j), tokens.get(j + 1), tokens.get(j + 2))
            {
                if a.as_char() != ':' || b.as_char() != ':' {
                    break;
                }
                segments.push(id.to_string());
                j += 3;
            }
            if segments.len() > 1 {
                self.note(&segments, span, false);
            }
            i = j;
        }
    }
}

impl<'ast> Visit<'ast> for Reader<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        // Submodules are read as modules of their own.
        if matches!(item, syn::Item::Mod(_)) || item_attrs(item).is_some_and(test_only) {
            return;
        }
        syn::visit::visit_item(self, item);
    }

    fn visit_impl_item(&mut self, item: &'ast syn::ImplItem) {
        let attrs = match item {
            syn::ImplItem::Const(c) => &c.attrs,
            syn::ImplItem::Fn(f) => &f.attrs,
            syn::ImplItem::Type(t) => &t.attrs,
            _ => return syn::visit::visit_impl_item(self, item),
        };
        if !test_only(attrs) {
            syn::visit::visit_impl_item(self, item);
        }
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        if item.leading_colon.is_none() {
            self.use_tree(&mut Vec::new(), &item.tree);
        } else if let syn::UseTree::Path(path) = &item.tree {
            if path.ident == "agentloop" {
                self.use_tree(&mut Vec::new(), &item.tree);
            }
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if let Some(first) = path.segments.first() {
            // `::name` is an external crate, unless it is this one (`::agentloop::…`).
            if path.leading_colon.is_none() || first.ident == "agentloop" {
                let segments: Vec<String> =
                    path.segments.iter().map(|s| s.ident.to_string()).collect();
                self.note(&segments, first.ident.span(), false);
            }
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.tokens(mac.tokens.clone());
        syn::visit::visit_macro(self, mac);
    }

    fn visit_attribute(&mut self, attr: &'ast syn::Attribute) {
        // Doc comments are not imports; serde's and schemars' paths in strings are.
        if !(attr.path().is_ident("serde") || attr.path().is_ident("schemars")) {
            return;
        }
        let syn::Meta::List(list) = &attr.meta else { return };
        let mut strings = Vec::new();
        collect_strings(list.tokens.clone(), &mut strings);
        for (text, span) in strings {
            if let Ok(path) = syn::parse_str::<syn::Path>(&text) {
                let segments: Vec<String> =
                    path.segments.iter().map(|s| s.ident.to_string()).collect();
                self.note(&segments, span, false);
            }
        }
    }
}

fn collect_strings(tokens: TokenStream, out: &mut Vec<(String, Span)>) {
    for token in tokens {
        match token {
            TokenTree::Group(group) => collect_strings(group.stream(), out),
            TokenTree::Literal(literal) => {
                let span = literal.span();
                if let Ok(string) = syn::parse2::<syn::LitStr>(TokenTree::Literal(literal).into()) {
                    out.push((string.value(), span));
                }
            }
            _ => {}
        }
    }
}

fn item_attrs(item: &syn::Item) -> Option<&[syn::Attribute]> {
    Some(match item {
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::ExternCrate(i) => &i.attrs,
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::ForeignMod(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Macro(i) => &i.attrs,
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::TraitAlias(i) => &i.attrs,
        syn::Item::Type(i) => &i.attrs,
        syn::Item::Union(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        _ => return None,
    })
}

/// The cycles of one graph: for each strongly connected set of two modules or more, its
/// shortest loop through its first module, as `(from, to)` arrows.
fn cycles(graph: &BTreeMap<String, BTreeMap<String, Vec<Site>>>) -> Vec<Vec<(String, String)>> {
    let nodes: BTreeSet<&String> =
        graph.keys().chain(graph.values().flat_map(|t| t.keys())).collect();
    let reaches = |from: &String| {
        let mut seen = BTreeSet::new();
        let mut queue = VecDeque::from([from]);
        while let Some(node) = queue.pop_front() {
            for next in graph.get(node).into_iter().flat_map(|t| t.keys()) {
                if seen.insert(next) {
                    queue.push_back(next);
                }
            }
        }
        seen
    };
    let reach: BTreeMap<&String, BTreeSet<&String>> =
        nodes.iter().map(|n| (*n, reaches(n))).collect();
    let mut done = BTreeSet::new();
    let mut found = Vec::new();
    for node in &nodes {
        if done.contains(node) || !reach[node].contains(node) {
            continue;
        }
        let component: BTreeSet<&String> =
            reach[node].iter().filter(|m| reach[*m].contains(node)).copied().collect();
        done.extend(component.iter().copied());
        // The shortest way back to `node` inside its component.
        let mut back: BTreeMap<&String, &String> = BTreeMap::new();
        let mut queue = VecDeque::from([*node]);
        'search: while let Some(at) = queue.pop_front() {
            for next in graph.get(at).into_iter().flat_map(|t| t.keys()) {
                if !component.contains(next) {
                    continue;
                }
                if next == *node {
                    back.insert(next, at);
                    break 'search;
                }
                if !back.contains_key(next) {
                    back.insert(next, at);
                    queue.push_back(next);
                }
            }
        }
        let mut arrows = Vec::new();
        let mut to = *node;
        loop {
            let from = back[to];
            arrows.push((from.clone(), to.clone()));
            to = from;
            if to == *node {
                break;
            }
        }
        arrows.reverse();
        found.push(arrows);
    }
    found
}

/// A readable report of the cycles in `graphs`, empty when there are none.
fn cycle_report(graphs: &Graphs) -> String {
    let mut report = String::new();
    for (parent, graph) in graphs {
        let place = if parent.is_empty() { "crate".to_owned() } else { parent.join("::") };
        for cycle in cycles(graph) {
            let names: Vec<&str> = cycle.iter().map(|(from, _)| from.as_str()).collect();
            let _ = writeln!(report, "cycle in {place}: {} -> {}", names.join(" -> "), names[0]);
            for (from, to) in &cycle {
                let sites = &graph[from][to];
                let shown: Vec<String> = sites.iter().take(3).map(Site::to_string).collect();
                let more = sites.len().saturating_sub(3);
                let more = if more > 0 { format!(" (and {more} more)") } else { String::new() };
                let _ = writeln!(report, "  {from} -> {to}: {}{more}", shown.join(", "));
            }
        }
    }
    report
}

/// Imports that break [`LAYERS`], and top-level modules it does not place.
fn layer_report(graphs: &Graphs) -> String {
    let layer_of: BTreeMap<&str, usize> = LAYERS
        .iter()
        .enumerate()
        .flat_map(|(layer, names)| names.iter().map(move |name| (*name, layer)))
        .collect();
    let mut report = String::new();
    let top = graphs.get(&Vec::new()).cloned().unwrap_or_default();
    for (from, targets) in &top {
        for (to, sites) in targets {
            let (Some(&low), Some(&high)) =
                (layer_of.get(to.as_str()), layer_of.get(from.as_str()))
            else {
                continue;
            };
            if low >= high {
                let how = if low == high { "its own layer" } else { "a higher layer" };
                let _ = writeln!(
                    report,
                    "{from} (layer {high}) imports {to} ({how}, layer {low}): {}",
                    sites.iter().map(Site::to_string).collect::<Vec<_>>().join(", ")
                );
            }
        }
    }
    report
}

fn this_crate() -> Library {
    Library::read(Path::new(env!("CARGO_MANIFEST_DIR")))
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let report = cycle_report(&this_crate().graphs());
    assert!(report.is_empty(), "modules that import each other (break each loop):\n{report}");
}

#[test]
fn top_level_modules_import_only_lower_layers() {
    let library = this_crate();
    let top: BTreeSet<&str> =
        library.known.iter().filter(|p| p.len() == 1).map(|p| p[0].as_str()).collect();
    let listed: BTreeSet<&str> = LAYERS.iter().flat_map(|l| l.iter().copied()).collect();
    let unlisted: Vec<&&str> = top.difference(&listed).collect();
    let gone: Vec<&&str> = listed.difference(&top).collect();
    assert!(unlisted.is_empty(), "give these top-level modules a layer in LAYERS: {unlisted:?}");
    assert!(gone.is_empty(), "LAYERS names modules that do not exist: {gone:?}");
    let report = layer_report(&library.graphs());
    assert!(report.is_empty(), "imports against the layers (lower layers first):\n{report}");
}

/// The reader sees imports: arrows the crate is known to have are found (were nothing read,
/// the two checks above would pass on anything).
#[test]
fn the_reader_finds_known_imports() {
    let graphs = this_crate().graphs();
    let top = &graphs[&Vec::new()];
    for (from, to) in
        [("run", "event"), ("event", "terms"), ("agent", "driver"), ("store", "event")]
    {
        assert!(top.get(from).is_some_and(|t| t.contains_key(to)), "no arrow {from} -> {to}");
    }
    let provider = &graphs[&vec!["provider".to_owned()]];
    assert!(provider["openai_responses"].contains_key("openai"));
}

/// A small crate with a loop and an upward import, written to a temporary directory: both
/// checks name them.
#[test]
fn a_loop_and_an_upward_import_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("provider")).unwrap();
    let files = [
        ("lib.rs", "pub mod message;\npub mod provider;\npub mod agent;\n"),
        (
            "message.rs",
            "/// [`crate::agent`] in a doc comment is no import.\npub struct M;\n\
             pub fn m(x: u8) -> bool { matches!(x, crate::agent::ONE) }\n",
        ),
        ("provider/mod.rs", "pub mod a;\npub mod b;\n#[cfg(test)]\nmod tests;\n"),
        ("provider/a.rs", "use super::b::B;\npub struct A(pub B);\n"),
        ("provider/b.rs", "pub struct B;\npub fn f() -> Option<crate::provider::a::A> { None }\n"),
        ("provider/tests.rs", "use crate::agent::Agent;\n"),
        ("agent.rs", "pub const ONE: u8 = 1;\npub struct Agent(crate::message::M);\n"),
    ];
    for (path, text) in files {
        std::fs::write(src.join(path), text).unwrap();
    }
    let graphs = Library::read(dir.path()).graphs();
    let report = cycle_report(&graphs);
    assert!(report.contains("cycle in provider: a -> b -> a"), "{report}");
    assert!(report.contains("src/provider/a.rs:1 `super::b::B`"), "{report}");
    let top = &graphs[&Vec::new()];
    assert_eq!(top["message"]["agent"].len(), 1, "the macro call is read, the doc comment not");
    assert!(!top.contains_key("provider"), "test modules are not read: {top:?}");
    let layers = layer_report(&graphs);
    assert!(layers.contains("message (layer 1) imports agent (a higher layer"), "{layers}");
}

/// Prints the graph the checks read, level by level:
/// `cargo test -p agentloop --test module_layers -- --ignored --nocapture`.
#[test]
#[ignore = "prints the module graph"]
fn print_the_module_graph() {
    for (parent, graph) in this_crate().graphs() {
        let place = if parent.is_empty() { "crate".to_owned() } else { parent.join("::") };
        println!("{place}:");
        for (from, targets) in graph {
            let targets: Vec<String> =
                targets.iter().map(|(to, sites)| format!("{to} ({})", sites.len())).collect();
            println!("  {from} -> {}", targets.join(", "));
        }
    }
}
