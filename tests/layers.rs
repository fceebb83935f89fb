//! The module map of `src/lib.rs`, checked: every `crate::` path in `src/**/*.rs` against
//! the layer table, and the file-level import graph against cycles.
//!
//! Both checks parse the sources with `syn` from `src/lib.rs` down its `mod` lines. They read
//! every path that names an item of ours: `use` trees (renames, groups, globs, `pub use`),
//! paths in code and types, paths inside macro calls and `macro_rules!` bodies (`$crate::`),
//! `super::` and `self::` (resolved against the module that writes them, so a `super::` that
//! climbs out of a folder counts), and names brought in by a `use` (`use crate::store;` and
//! then `store::Scope`). Doc comments are no imports. Items under `#[cfg(test)]` are skipped;
//! test support (`#[cfg(any(test, feature = "test-util"))]`, `#[cfg(feature = "test-util")]`;
//! the `test_util` module whole) is exempt from the layer table but not from the cycle check.
//!
//! - [`layers`]: the top-level module of the file that writes a path may import the top-level
//!   module the path names only if [`TABLE`] allows it (or [`EXCEPTIONS`] lists the pair).
//! - [`cycles`]: a path is an arrow from the file that writes it to the file that defines the
//!   item (through re-exports). A module's paths into its own submodules (its `pub use`
//!   lines, the calls that dispatch to them) are its map and draw no arrow; a submodule's
//!   paths up to it do. Files that reach each other (a strongly connected component) fail
//!   the check when they lie in different top-level folders, and inside one folder unless
//!   [`SPLIT_FOR_SIZE`] names the folder (or [`CYCLE_EXCEPTIONS`] the files).
//!
//! An exception that no longer matches anything fails too: delete its line.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use syn::spanned::Spanned;
use syn::visit::{self, Visit};

/// The layer table, bottom up: each top-level module of `src/` with the top-level modules it
/// may import (its own is always allowed). `src/lib.rs` carries the same map in words; a new
/// top-level module fails [`layers`] until it has a line here.
#[rustfmt::skip]
const TABLE: &[(&str, &[&str])] = &[
    // 1. The vocabulary: the caller boundary, wire types, errors, configuration; nothing of
    // ours but each other.
    ("scope",     &[]),
    ("protocol",  &[]),
    // A2aError, the spec's error catalogue: a protocol word, in a top-level file so that its
    // many importers keep their path.
    ("error",     &["protocol"]),
    // URLs with their secrets hidden: one rule for the configuration's own output and for
    // log lines (config, telemetry and upstream all print URLs), a leaf they all import.
    ("log_url",   &[]),
    ("config",    &["protocol", "log_url"]),
    // mimalloc's purge loop: a leaf that imports nothing of ours.
    ("allocator", &[]),
    // 2. Metrics catalogue, spans, log helpers.
    ("telemetry", &["scope", "protocol", "error", "config", "log_url"]),
    // 3. The executor API.
    ("executor",  &["scope", "protocol", "error", "config", "log_url", "telemetry"]),
    // 4. Task storage: the traits, every backend, one conformance suite.
    ("store",     &["scope", "protocol", "error", "config", "log_url", "telemetry", "executor"]),
    // 5. Beside each other, never each other; `upstream` never store, cluster or config.
    ("upstream",  &["scope", "protocol", "error", "log_url", "telemetry", "executor"]),
    ("identity",  &["scope", "protocol", "error", "config", "log_url", "telemetry", "executor", "store"]),
    ("push",      &["scope", "protocol", "error", "config", "log_url", "telemetry", "executor", "store"]),
    ("cluster",   &["scope", "protocol", "error", "config", "log_url", "telemetry", "executor", "store"]),
    // The example executors (hello world, release review): executors, as `upstream` is.
    ("agents",    &["scope", "protocol", "error", "telemetry", "executor"]),
    // 6. A2A semantics by operation: layers 1-5 but upstream and identity.
    ("handler",   &["scope", "protocol", "error", "config", "log_url", "telemetry", "executor", "store",
                    "push", "cluster"]),
    // 7. The bindings, then the HTTP server, then the operations endpoints and HTTPS (rustls
    // around the server's accept loop).
    ("transport", &["scope", "protocol", "error", "config", "log_url", "telemetry", "executor", "store",
                    "push", "cluster", "identity", "handler"]),
    ("server",    &["scope", "protocol", "error", "config", "log_url", "telemetry", "executor", "store",
                    "push", "cluster", "identity", "handler", "transport"]),
    ("ops",       &["scope", "protocol", "error", "config", "log_url", "telemetry", "executor", "store",
                    "push", "cluster", "identity", "handler", "transport"]),
    ("tls",       &["scope", "protocol", "error", "config", "log_url", "telemetry", "executor", "store",
                    "push", "cluster", "identity", "handler", "transport", "server"]),
    // 8. Assembly, then the command line. `demo` holds the stand-ins that the `demo` command
    // starts (a runtime, an OAuth issuer): they speak HTTP only and import nothing of ours.
    ("demo",      &[]),
    ("app",       &["scope", "protocol", "error", "config", "log_url", "allocator", "telemetry", "executor",
                    "store", "push", "cluster", "identity", "upstream", "agents", "handler",
                    "transport", "server", "ops", "tls"]),
    ("cli",       &["scope", "protocol", "error", "config", "log_url", "allocator", "telemetry", "executor",
                    "store", "push", "cluster", "identity", "upstream", "agents", "handler",
                    "transport", "server", "ops", "tls", "demo", "app"]),
];

/// Imports the table forbids that the code still has, one line each: from, to, what. Each
/// line goes in the commit whose move removes the import.
#[rustfmt::skip]
const EXCEPTIONS: &[(&str, &str, &str)] = &[
];

/// Folders (module paths) whose files import each other because one concept was split only
/// for size, with the reason.
const SPLIT_FOR_SIZE: &[(&str, &str)] = &[];

/// Import cycles the code still has (the module paths of the files, sorted), with what ties
/// them; each line goes in the commit that breaks the cycle.
#[rustfmt::skip]
const CYCLE_EXCEPTIONS: &[(&[&str], &str)] = &[
];

#[test]
fn layers() {
    let krate = Crate::load(Path::new(env!("CARGO_MANIFEST_DIR")).join("src").as_path());
    let report = check_layers(&krate, TABLE, EXCEPTIONS);
    assert!(report.is_empty(), "{report}");
}

#[test]
fn cycles() {
    let krate = Crate::load(Path::new(env!("CARGO_MANIFEST_DIR")).join("src").as_path());
    let report = check_cycles(&krate, SPLIT_FOR_SIZE, CYCLE_EXCEPTIONS);
    assert!(report.is_empty(), "{report}");
}

/// A re-export never widens the table: a module `m` that re-exports an item of another
/// top-level module `x` (`pub use crate::x::…`) makes it reachable as `crate::m::…`, which
/// the path check reads as an import of `m`; so every module allowed `m` must be allowed
/// `x` too. (Otherwise a re-export launders an import the table forbids: `telemetry`
/// re-exporting `config`'s URL masking let `upstream` reach `config`.)
#[test]
fn re_exports_widen_no_layer() {
    let krate = Crate::load(Path::new(env!("CARGO_MANIFEST_DIR")).join("src").as_path());
    let allowed = |m: &str, x: &str| {
        m == x
            || TABLE
                .iter()
                .any(|(row, list)| *row == m && list.contains(&x))
    };
    let mut report = String::new();
    for (file, module) in &krate.file_modules {
        let Some(own) = module.first() else { continue };
        let text = fs::read_to_string(file).unwrap();
        for (i, line) in text.lines().enumerate() {
            let Some(rest) = line.trim_start().strip_prefix("pub use crate::") else {
                continue;
            };
            let x: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if x == *own {
                continue;
            }
            for (importer, _) in TABLE.iter().filter(|(r, _)| allowed(r, own) && *r != own) {
                if !allowed(importer, &x) {
                    writeln!(
                        report,
                        "{}:{}: `{own}` re-exports `{x}`, which `{importer}` (allowed `{own}`) may not import",
                        file.display(),
                        i + 1
                    )
                    .unwrap();
                }
            }
        }
    }
    assert!(report.is_empty(), "{report}");
}

/// The checks on a small crate of their own: each kind of path they must see, and what they
/// must skip.
#[test]
fn the_checks_see_every_kind_of_path() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    let write = |path: &str, text: &str| {
        let path = src.join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    };
    write(
        "lib.rs",
        "pub mod low; pub mod high; pub mod other; pub use high::Top;",
    );
    // low imports high five times (two `use` lines, a `super::` that climbs out of low, a
    // path through the alias, a macro body); its test code and test support do not count.
    write(
        "low/mod.rs",
        "mod inner;\n\
         use crate::high::Top;\n\
         pub struct Low;\n\
         macro_rules! m { () => { $crate::high::Top } }\n\
         #[cfg(test)] mod tests { use crate::other::Other; }\n\
         #[cfg(any(test, feature = \"test-util\"))] pub fn support() { let _ = crate::high::Top; }\n",
    );
    write(
        "low/inner.rs",
        "use crate::high as up;\n\
         pub fn f() { let _ = super::super::high::Top; let _ = up::Top; }\n",
    );
    write(
        "high.rs",
        "mod part; pub use part::Top; pub fn g() { let _ = crate::low::Low; }\n",
    );
    write("high/part.rs", "pub struct Top;\n");
    // other.rs re-exports its submodule, which uses it back: a module's map, no cycle.
    write(
        "other.rs",
        "mod leaf; pub use leaf::Leaf; pub struct Other; \
         pub fn h() { let _ = crate::low::support; }\n",
    );
    write(
        "other/leaf.rs",
        "pub struct Leaf; pub fn l() { let _ = super::Other; }\n",
    );
    let krate = Crate::load(src);

    let table: &[(&str, &[&str])] = &[("low", &[]), ("high", &["low"]), ("other", &["low"])];
    let report = check_layers(&krate, table, &[]);
    let lines: Vec<&str> = report.lines().filter(|l| l.starts_with("src/")).collect();
    assert_eq!(
        lines,
        [
            "src/low/inner.rs:1: `crate::high` (low -> high)",
            "src/low/inner.rs:2: `super::super::high::Top` (low -> high)",
            "src/low/inner.rs:2: `up::Top` (low -> high)",
            "src/low/mod.rs:2: `crate::high::Top` (low -> high)",
            "src/low/mod.rs:4: `crate::high::Top` (low -> high)",
        ],
        "{report}"
    );
    // Listed, the pair passes; listed and unused, it fails.
    assert_eq!(check_layers(&krate, table, &[("low", "high", "Top")]), "");
    let stale = check_layers(
        &krate,
        &[("low", &["high"]), ("high", &["low"]), ("other", &["low"])],
        &[("low", "high", "Top")],
    );
    assert!(stale.contains("no longer needed: low -> high"), "{stale}");

    // low/mod.rs reaches high/part.rs through high.rs's re-export, so high.rs -> low/mod.rs
    // closes no cycle; nor does other.rs -> low/mod.rs with low's test support (which
    // counts here) -> high/part.rs; nor other.rs <-> other/leaf.rs.
    assert_eq!(check_cycles(&krate, &[], &[]), "");
    // A file of high that uses low, which uses it: a cycle across top-level folders.
    write(
        "high/part.rs",
        "pub struct Top; pub fn k() { let _ = crate::low::Low; }\n",
    );
    let krate = Crate::load(src);
    let report = check_cycles(&krate, &[], &[]);
    assert!(report.contains("high::part, low"), "{report}");
    assert!(
        report.contains("src/high/part.rs:1 -> src/low/mod.rs: `crate::low::Low`"),
        "{report}"
    );
    assert!(
        report.contains("src/low/mod.rs:2 -> src/high/part.rs: `crate::high::Top`"),
        "{report}"
    );
    assert_eq!(
        check_cycles(&krate, &[], &[(&["high::part", "low"], "test")]),
        ""
    );
}

/// Checks every path of `krate` against `table`; returns the report, empty when it passes.
fn check_layers(
    krate: &Crate,
    table: &[(&str, &[&str])],
    exceptions: &[(&str, &str, &str)],
) -> String {
    let mut report = String::new();
    let tops: BTreeSet<&str> = krate.modules[0]
        .children
        .keys()
        .map(String::as_str)
        .collect();
    // Test support (a module under `cfg(feature = "test-util")`) is outside the table.
    let tested = |top: &&&str| krate.modules[krate.modules[0].children[**top]].gate == Gate::Always;
    for top in tops.iter().filter(tested) {
        if !table.iter().any(|(m, _)| m == top) {
            writeln!(
                report,
                "src/{top}: a top-level module with no line in the layer table"
            )
            .unwrap();
        }
    }
    for (m, _) in table {
        if !tops.contains(m) {
            writeln!(
                report,
                "the layer table names `{m}`, which src/lib.rs does not declare"
            )
            .unwrap();
        }
    }
    let mut used = vec![false; exceptions.len()];
    let mut found = BTreeSet::new();
    for r in &krate.refs {
        if r.gate != Gate::Always {
            continue;
        }
        let module = &krate.modules[r.module];
        let Some(from) = module.path.first() else {
            continue;
        };
        let Some(abs) = krate.absolute(r.module, &r.path, 0) else {
            continue;
        };
        let Some(to) = krate.root_of(&abs) else {
            continue;
        };
        if *from == to {
            continue;
        }
        let allowed = table
            .iter()
            .any(|(m, may)| m == from && may.contains(&to.as_str()));
        if allowed {
            continue;
        }
        if let Some(i) = exceptions
            .iter()
            .position(|(f, t, _)| f == from && *t == to)
        {
            used[i] = true;
            continue;
        }
        found.insert(format!(
            "{}:{}: `{}` ({from} -> {to})",
            krate.display(&module.file),
            r.line,
            r.path.join("::")
        ));
    }
    for line in &found {
        writeln!(report, "{line}").unwrap();
    }
    if !found.is_empty() {
        writeln!(
            report,
            "each line above imports a module that the layer table of tests/layers.rs (and the \
             module map of src/lib.rs) puts above the importer, or beside it: move the item down \
             to where both may reach it"
        )
        .unwrap();
    }
    for (i, (from, to, what)) in exceptions.iter().enumerate() {
        if !used[i] {
            writeln!(
                report,
                "exception no longer needed: {from} -> {to}: {what}: delete its line"
            )
            .unwrap();
        }
    }
    report
}

/// Finds the import cycles between files of `krate`; returns the report, empty when it passes.
fn check_cycles(
    krate: &Crate,
    split_for_size: &[(&str, &str)],
    exceptions: &[(&[&str], &str)],
) -> String {
    // Arrows: file -> file, with one example of the path that draws each.
    let mut arrows: BTreeMap<(PathBuf, PathBuf), (usize, String)> = BTreeMap::new();
    for r in &krate.refs {
        if r.gate == Gate::Test {
            continue;
        }
        let from = &krate.modules[r.module].file;
        let Some(abs) = krate.absolute(r.module, &r.path, 0) else {
            continue;
        };
        let target = krate.locate(&abs, 0).file;
        let (from_path, to_path) = (&krate.file_modules[from], &krate.file_modules[&target]);
        // A module's arrows into its own submodules (its `pub use` lines, the calls that
        // dispatch to them) are the folder's map, not an import.
        if !to_path.starts_with(from_path) {
            arrows
                .entry((from.clone(), target))
                .or_insert_with(|| (r.line, r.path.join("::")));
        }
    }
    let files: Vec<PathBuf> = krate.file_modules.keys().cloned().collect();
    let index: BTreeMap<&PathBuf, usize> = files.iter().enumerate().map(|(i, f)| (f, i)).collect();
    let mut next = vec![Vec::new(); files.len()];
    for (from, to) in arrows.keys() {
        next[index[from]].push(index[to]);
    }
    let mut report = String::new();
    let mut used = vec![false; exceptions.len()];
    for component in strongly_connected(&next) {
        if component.len() < 2 {
            continue;
        }
        let mut members: Vec<String> = component
            .iter()
            .map(|&i| krate.file_modules[&files[i]].join("::"))
            .collect();
        members.sort();
        let paths: Vec<&[String]> = component
            .iter()
            .map(|&i| krate.file_modules[&files[i]].as_slice())
            .collect();
        let common = paths[1..].iter().fold(paths[0].to_vec(), |common, p| {
            common
                .iter()
                .zip(p.iter())
                .take_while(|(a, b)| a == b)
                .map(|(a, _)| a.clone())
                .collect()
        });
        let folder = common.join("::");
        if !common.is_empty() && split_for_size.iter().any(|(f, _)| *f == folder) {
            continue;
        }
        if let Some(i) = exceptions
            .iter()
            .position(|(m, _)| m.iter().copied().eq(members.iter().map(String::as_str)))
        {
            used[i] = true;
            continue;
        }
        let place = if common.is_empty() {
            "across top-level folders".to_string()
        } else {
            format!("inside `{folder}`")
        };
        writeln!(report, "import cycle {place}: {}", members.join(", ")).unwrap();
        let inside: BTreeSet<&PathBuf> = component.iter().map(|&i| &files[i]).collect();
        for ((from, to), (line, path)) in &arrows {
            if inside.contains(from) && inside.contains(to) {
                writeln!(
                    report,
                    "  {}:{line} -> {}: `{path}`",
                    krate.display(from),
                    krate.display(to)
                )
                .unwrap();
            }
        }
    }
    if !report.is_empty() {
        writeln!(
            report,
            "files in a cycle cannot be read, tested or moved one at a time: move the shared item \
             into a file that both import (or name a folder split only for size in \
             SPLIT_FOR_SIZE of tests/layers.rs, with the reason)"
        )
        .unwrap();
    }
    for (i, (members, what)) in exceptions.iter().enumerate() {
        if !used[i] {
            writeln!(
                report,
                "cycle exception no longer needed: {}: {what}: delete its line",
                members.join(", ")
            )
            .unwrap();
        }
    }
    report
}

/// Tarjan's strongly connected components of the graph `next` (node -> its successors).
fn strongly_connected(next: &[Vec<usize>]) -> Vec<Vec<usize>> {
    struct State<'a> {
        next: &'a [Vec<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        counter: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(s: &mut State<'_>, v: usize) {
        s.index[v] = Some(s.counter);
        s.low[v] = s.counter;
        s.counter += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        for &w in &s.next[v] {
            match s.index[w] {
                None => {
                    visit(s, w);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(i) if s.on_stack[w] => s.low[v] = s.low[v].min(i),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut component = Vec::new();
            loop {
                let w = s.stack.pop().unwrap();
                s.on_stack[w] = false;
                component.push(w);
                if w == v {
                    break;
                }
            }
            s.out.push(component);
        }
    }
    let n = next.len();
    let mut s = State {
        next,
        index: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        counter: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            visit(&mut s, v);
        }
    }
    s.out
}

/// Under which `cfg` an item is compiled.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Gate {
    /// Always (or under a cfg that is not about tests).
    Always,
    /// Test support: `cfg(feature = "test-util")`, alone or in an `any` with `test`.
    TestSupport,
    /// `cfg(test)`: unit tests.
    Test,
}

/// One module: a file or an inline `mod name { ... }`.
struct Module {
    /// Its path from the crate root (`["store", "memory"]`; empty for `lib.rs`).
    path: Vec<String>,
    /// The file that holds it.
    file: PathBuf,
    /// The folder where its `mod name;` children are.
    dir: PathBuf,
    /// Child modules by name.
    children: BTreeMap<String, usize>,
    /// Names of the items it defines.
    items: BTreeSet<String>,
    /// Its `use` entries: the name they bring in (`None`: a glob) and the path as written.
    uses: Vec<(Option<String>, Vec<String>)>,
    /// The `cfg` it is compiled under.
    gate: Gate,
}

/// A path as written, and where.
struct Reference {
    /// The module that writes it.
    module: usize,
    /// Its segments (`crate`, `super`, `self`, or a name in scope first).
    path: Vec<String>,
    /// Its line.
    line: usize,
    /// The `cfg` of the code that writes it.
    gate: Gate,
}

/// Where a path leads.
struct Target {
    /// The module whose item it names (or the module it names).
    module: usize,
    /// The file that defines the item.
    file: PathBuf,
    /// Whether the item was found (and not only its module).
    found: bool,
}

/// The parsed crate.
struct Crate {
    /// The `src` folder.
    root: PathBuf,
    /// Every module; `lib.rs` first.
    modules: Vec<Module>,
    /// Every path that may name an item of ours.
    refs: Vec<Reference>,
    /// Each file (outside `cfg(test)`) with its module path.
    file_modules: BTreeMap<PathBuf, Vec<String>>,
}

impl Crate {
    /// Parses `src/lib.rs` and every module it declares; panics on a file it cannot read or
    /// parse, and on a `.rs` file under `src/` that no `mod` line reaches.
    fn load(src: &Path) -> Crate {
        let mut krate = Crate {
            root: src.to_path_buf(),
            modules: Vec::new(),
            refs: Vec::new(),
            file_modules: BTreeMap::new(),
        };
        let mut test_files = BTreeSet::new();
        krate.load_file(
            &src.join("lib.rs"),
            Vec::new(),
            Gate::Always,
            &mut test_files,
        );
        let mut missing = Vec::new();
        let mut stack = vec![src.to_path_buf()];
        while let Some(dir) = stack.pop() {
            for entry in fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "rs")
                    && path != src.join("main.rs")
                    && !krate.file_modules.contains_key(&path)
                    && !test_files.iter().any(|t| path.starts_with(t))
                {
                    missing.push(path.display().to_string());
                }
            }
        }
        assert!(
            missing.is_empty(),
            "files no `mod` line of src/lib.rs reaches: {missing:?}"
        );
        krate
    }

    fn load_file(
        &mut self,
        file: &Path,
        path: Vec<String>,
        gate: Gate,
        test_files: &mut BTreeSet<PathBuf>,
    ) -> usize {
        let text = fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let name = file.file_name().unwrap();
        let dir = if name == "lib.rs" || name == "mod.rs" {
            file.parent().unwrap().to_path_buf()
        } else {
            file.with_extension("")
        };
        self.file_modules.insert(file.to_path_buf(), path.clone());
        let id = self.modules.len();
        self.modules.push(Module {
            path,
            file: file.to_path_buf(),
            dir,
            children: BTreeMap::new(),
            items: BTreeSet::new(),
            uses: Vec::new(),
            gate,
        });
        let mut collector = Collector {
            krate: self,
            module: id,
            gate,
            test_files,
        };
        collector.visit_file(&ast);
        id
    }

    /// `file` relative to the crate folder, as `src/...`.
    fn display(&self, file: &Path) -> String {
        format!(
            "src/{}",
            file.strip_prefix(&self.root).unwrap_or(file).display()
        )
    }

    /// The path `raw`, written in module `m`, from the crate root; `None` when it names
    /// nothing of ours (another crate, a local item).
    fn absolute(&self, m: usize, raw: &[String], depth: usize) -> Option<Vec<String>> {
        let module = &self.modules[m];
        let first = raw.first()?;
        match first.as_str() {
            "crate" => Some(raw[1..].to_vec()),
            "super" | "self" => {
                let mut path = module.path.clone();
                let mut rest = raw;
                while let Some(s) = rest.first() {
                    match s.as_str() {
                        "super" => {
                            path.pop()?;
                        }
                        "self" => {}
                        _ => break,
                    }
                    rest = &rest[1..];
                }
                path.extend(rest.iter().cloned());
                Some(path)
            }
            _ if module.children.contains_key(first) => {
                Some(module.path.iter().chain(raw).cloned().collect())
            }
            _ if depth < 8 => module
                .uses
                .iter()
                .filter(|(name, target)| name.as_ref() == Some(first) && target.as_slice() != raw)
                .find_map(|(_, target)| self.absolute(m, target, depth + 1))
                .map(|mut path| {
                    path.extend(raw[1..].iter().cloned());
                    path
                }),
            _ => None,
        }
    }

    /// The module and the defining file of the absolute path `abs`, through re-exports.
    fn locate(&self, abs: &[String], depth: usize) -> Target {
        let mut m = 0;
        let mut i = 0;
        while let Some(&child) = abs.get(i).and_then(|s| self.modules[m].children.get(s)) {
            m = child;
            i += 1;
        }
        let module = &self.modules[m];
        let here = |found| Target {
            module: m,
            file: module.file.clone(),
            found,
        };
        let Some(name) = abs.get(i) else {
            return here(true);
        };
        if module.items.contains(name) {
            return here(true);
        }
        if depth < 8 {
            let named = module.uses.iter().filter(|(n, _)| n.as_ref() == Some(name));
            let globs = module.uses.iter().filter(|(n, _)| n.is_none());
            for (local, target) in named.chain(globs) {
                let Some(mut path) = self.absolute(m, target, 0) else {
                    continue;
                };
                let rest = if local.is_some() {
                    &abs[i + 1..]
                } else {
                    &abs[i..]
                };
                path.extend(rest.iter().cloned());
                let t = self.locate(&path, depth + 1);
                if t.found {
                    return t;
                }
            }
        }
        here(false)
    }

    /// The top-level module that the absolute path `abs` names (through a re-export of
    /// `lib.rs` when it names an item of the crate root).
    fn root_of(&self, abs: &[String]) -> Option<String> {
        let first = abs.first()?;
        if self.modules[0].children.contains_key(first) {
            return Some(first.clone());
        }
        let t = self.locate(abs, 0);
        self.modules[t.module].path.first().cloned()
    }
}

/// Walks one file: its modules, items, `use` entries and paths.
struct Collector<'a> {
    krate: &'a mut Crate,
    module: usize,
    gate: Gate,
    test_files: &'a mut BTreeSet<PathBuf>,
}

impl Collector<'_> {
    fn reference(&mut self, path: Vec<String>, line: usize) {
        self.krate.refs.push(Reference {
            module: self.module,
            path,
            line,
            gate: self.gate,
        });
    }

    /// Runs `f` with the gate of `attrs`; skips it under `cfg(test)`.
    fn gated(&mut self, attrs: &[syn::Attribute], f: impl FnOnce(&mut Self)) {
        let outer = self.gate;
        self.gate = self.gate.max(gate_of(attrs));
        if self.gate != Gate::Test {
            f(self);
        }
        self.gate = outer;
    }

    /// Every `a::b::c` in a macro's tokens that may name an item of ours.
    fn scan(&mut self, tokens: TokenStream) {
        let tokens: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < tokens.len() {
            match &tokens[i] {
                TokenTree::Group(g) => self.scan(g.stream()),
                TokenTree::Ident(first) => {
                    let line = first.span().start().line;
                    let mut path = vec![first.to_string()];
                    while let [
                        TokenTree::Punct(a),
                        TokenTree::Punct(b),
                        TokenTree::Ident(next),
                        ..,
                    ] = &tokens[i + 1..]
                        && a.as_char() == ':'
                        && b.as_char() == ':'
                    {
                        path.push(next.to_string());
                        i += 3;
                    }
                    if path.len() > 1 {
                        self.reference(path, line);
                    }
                }
                _ => {}
            }
            i += 1;
        }
    }
}

impl<'ast> Visit<'ast> for Collector<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs = item_attrs(item);
        if let syn::Item::Mod(m) = item
            && m.content.is_none()
            && self.gate.max(gate_of(attrs)) == Gate::Test
        {
            let dir = &self.krate.modules[self.module].dir;
            self.test_files.insert(dir.join(format!("{}.rs", m.ident)));
            self.test_files.insert(dir.join(m.ident.to_string()));
        }
        self.gated(attrs, |c| {
            if let Some(name) = item_name(item) {
                c.krate.modules[c.module].items.insert(name);
            }
            visit::visit_item(c, item);
        });
    }

    fn visit_impl_item(&mut self, item: &'ast syn::ImplItem) {
        let attrs = match item {
            syn::ImplItem::Const(i) => &i.attrs[..],
            syn::ImplItem::Fn(i) => &i.attrs,
            syn::ImplItem::Type(i) => &i.attrs,
            syn::ImplItem::Macro(i) => &i.attrs,
            _ => &[],
        };
        self.gated(attrs, |c| visit::visit_impl_item(c, item));
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        let name = item.ident.to_string();
        let parent = &self.krate.modules[self.module];
        let path: Vec<String> = parent.path.iter().cloned().chain([name.clone()]).collect();
        let dir = parent.dir.join(&name);
        let id = match &item.content {
            Some((_, items)) => {
                let file = parent.file.clone();
                let id = self.krate.modules.len();
                self.krate.modules.push(Module {
                    path,
                    file,
                    dir,
                    children: BTreeMap::new(),
                    items: BTreeSet::new(),
                    uses: Vec::new(),
                    gate: self.gate,
                });
                let outer = std::mem::replace(&mut self.module, id);
                for i in items {
                    self.visit_item(i);
                }
                self.module = outer;
                id
            }
            None => {
                let flat = parent.dir.join(format!("{name}.rs"));
                let file = if flat.exists() {
                    flat
                } else {
                    dir.join("mod.rs")
                };
                let gate = self.gate;
                self.krate.load_file(&file, path, gate, self.test_files)
            }
        };
        self.krate.modules[self.module].children.insert(name, id);
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        if item.leading_colon.is_some() {
            return;
        }
        let mut entries = Vec::new();
        expand(&item.tree, Vec::new(), &mut entries);
        let line = item.span().start().line;
        for (name, path) in entries {
            self.reference(path.clone(), line);
            self.krate.modules[self.module].uses.push((name, path));
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.leading_colon.is_none() && path.segments.len() > 1 {
            let segments = path.segments.iter().map(|s| s.ident.to_string()).collect();
            self.reference(segments, path.span().start().line);
        }
        visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.scan(mac.tokens.clone());
        visit::visit_macro(self, mac);
    }
}

/// The entries of a `use` tree: the name each brings in (`None`: a glob) and its full path.
fn expand(tree: &syn::UseTree, prefix: Vec<String>, out: &mut Vec<(Option<String>, Vec<String>)>) {
    let with = |ident: &syn::Ident| -> Vec<String> {
        let mut path = prefix.clone();
        if ident != "self" {
            path.push(ident.to_string());
        }
        path
    };
    match tree {
        syn::UseTree::Path(p) => expand(&p.tree, with(&p.ident), out),
        syn::UseTree::Name(n) => {
            let path = with(&n.ident);
            out.push((path.last().cloned(), path));
        }
        syn::UseTree::Rename(r) => out.push((Some(r.rename.to_string()), with(&r.ident))),
        syn::UseTree::Glob(_) => out.push((None, prefix)),
        syn::UseTree::Group(g) => {
            for tree in &g.items {
                expand(tree, prefix.clone(), out);
            }
        }
    }
}

/// The gate of the `cfg` attributes in `attrs`.
fn gate_of(attrs: &[syn::Attribute]) -> Gate {
    attrs
        .iter()
        .filter(|a| a.path().is_ident("cfg"))
        .filter_map(|a| a.parse_args::<syn::Meta>().ok())
        .map(|meta| cfg_gate(&meta))
        .max()
        .unwrap_or(Gate::Always)
}

/// `test` is [`Gate::Test`], `feature = "test-util"` and an `any` of only such predicates
/// [`Gate::TestSupport`] (or `Test` when every one is `test`), an `all` the strictest of its
/// parts; anything else [`Gate::Always`].
fn cfg_gate(meta: &syn::Meta) -> Gate {
    match meta {
        syn::Meta::Path(p) if p.is_ident("test") => Gate::Test,
        syn::Meta::NameValue(nv) if nv.path.is_ident("feature") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) if s.value() == "test-util" => Gate::TestSupport,
            _ => Gate::Always,
        },
        syn::Meta::List(list) if list.path.is_ident("any") || list.path.is_ident("all") => {
            let parts: Vec<Gate> = list
                .parse_args_with(
                    syn::punctuated::Punctuated::<syn::Meta, syn::Token![,]>::parse_terminated,
                )
                .map(|p| p.iter().map(cfg_gate).collect())
                .unwrap_or_default();
            if list.path.is_ident("all") {
                parts.into_iter().max().unwrap_or(Gate::Always)
            } else {
                parts.into_iter().min().unwrap_or(Gate::Always)
            }
        }
        _ => Gate::Always,
    }
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    use syn::Item::*;
    match item {
        Const(i) => &i.attrs,
        Enum(i) => &i.attrs,
        ExternCrate(i) => &i.attrs,
        Fn(i) => &i.attrs,
        ForeignMod(i) => &i.attrs,
        Impl(i) => &i.attrs,
        Macro(i) => &i.attrs,
        Mod(i) => &i.attrs,
        Static(i) => &i.attrs,
        Struct(i) => &i.attrs,
        Trait(i) => &i.attrs,
        TraitAlias(i) => &i.attrs,
        Type(i) => &i.attrs,
        Union(i) => &i.attrs,
        Use(i) => &i.attrs,
        _ => &[],
    }
}

fn item_name(item: &syn::Item) -> Option<String> {
    use syn::Item::*;
    let ident = match item {
        Const(i) => &i.ident,
        Enum(i) => &i.ident,
        Fn(i) => &i.sig.ident,
        Macro(i) => i.ident.as_ref()?,
        Static(i) => &i.ident,
        Struct(i) => &i.ident,
        Trait(i) => &i.ident,
        TraitAlias(i) => &i.ident,
        Type(i) => &i.ident,
        Union(i) => &i.ident,
        _ => return None,
    };
    Some(ident.to_string())
}
