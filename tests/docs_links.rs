//! The documents' relative links resolve: every tracked `*.md` file of the repository (the
//! README, `BENCHMARKS.md`, `docs/`) is read, and each relative link or image, inline
//! (`[text](path#anchor)`) or by reference definition (`[label]: path`), must name a file or
//! folder that exists, and its `#anchor`, when the target is a Markdown file, a heading of
//! that file. Anchors are GitHub's heading slugs: the heading's text as rendered, lower-cased,
//! every character but letters, digits, `_`, `-` and spaces dropped, each space a `-`; a
//! repeated slug gets `-1`, `-2`, … in order. Links with a scheme (`https:`, `mailto:`) are
//! not fetched, and nothing inside fenced code blocks or code spans is a link.
//!
//! The files are the ones `git ls-files` lists; without git (a source archive), every `*.md`
//! under the repository except `target/`, `node_modules/` and hidden folders.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};
use std::process::Command;

/// Every tracked Markdown file's links resolve.
#[test]
fn every_relative_link_and_anchor_in_the_docs_resolves() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = markdown_files(root);
    assert!(
        files.iter().any(|f| f == Path::new("README.md")),
        "README.md not among the Markdown files found: {files:?}"
    );
    let problems = check(root, &files);
    assert!(
        problems.is_empty(),
        "{} broken link(s) in the docs:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// The checker finds what it must: a missing file, a missing anchor, a missing anchor in the
/// same file; and accepts the forms GitHub resolves (a folder, a repeated heading's `-1`, a
/// percent-encoded space, an anchor with code and punctuation, a reference definition).
#[test]
fn the_checker_reports_missing_files_and_anchors() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir(root.join("docs")).unwrap();
    std::fs::write(
        root.join("docs/guide one.md"),
        "# Guide\n\n## Setup\n\n## Setup\n\n### 2.1 `kind = \"forward\"`: the caller's token\n",
    )
    .unwrap();
    std::fs::write(
        root.join("README.md"),
        "\
# Top

See [the guide](docs/guide%20one.md#setup-1), [code](docs/guide%20one.md#21-kind--forward-the-callers-token),
[the folder](docs/) and [here](#top), [web](https://example.com/missing.md).

```sh
[not a link](nowhere.md)
```

Also `[not a link](nowhere.md)` in code.

[gone](docs/missing.md) [bad anchor](docs/guide%20one.md#teardown) [self](#bottom)

[ref]: docs/also-missing.md
",
    )
    .unwrap();
    let problems = check(
        root,
        &[
            PathBuf::from("README.md"),
            PathBuf::from("docs/guide one.md"),
        ],
    );
    let expect = [
        "README.md:12: docs/missing.md: no such file",
        "README.md:12: docs/guide%20one.md#teardown: no heading with the anchor `teardown` in docs/guide one.md",
        "README.md:12: #bottom: no heading with the anchor `bottom` in README.md",
        "README.md:14: docs/also-missing.md: no such file",
    ];
    assert_eq!(problems, expect);
}

/// GitHub's slugs for the kinds of headings these documents use.
#[test]
fn slugs_follow_github() {
    for (heading, slug) in [
        (
            "SQLite synchronous: FULL vs NORMAL",
            "sqlite-synchronous-full-vs-normal",
        ),
        (
            "2.1 `kind = \"forward\"`: the caller's own token",
            "21-kind--forward-the-callers-own-token",
        ),
        (
            "Issue 14, third pass (2026-12-02, 05:20-06:45 UTC): the allocator",
            "issue-14-third-pass-2026-12-02-0520-0645-utc-the-allocator",
        ),
        (
            "**Bold** and [a link](x.md) with_underscore",
            "bold-and-a-link-with_underscore",
        ),
        ("Zoë's café", "zoës-café"),
    ] {
        assert_eq!(github_slug(heading), slug, "{heading}");
    }
}

/// Repository-relative paths of the Markdown files to check.
fn markdown_files(root: &Path) -> Vec<PathBuf> {
    let git = Command::new("git")
        .args(["ls-files", "-z", "--", "*.md"])
        .current_dir(root)
        .output();
    match git {
        Ok(out) if out.status.success() => out
            .stdout
            .split(|b| *b == 0)
            .filter(|name| !name.is_empty())
            .map(|name| PathBuf::from(String::from_utf8_lossy(name).into_owned()))
            .filter(|path| root.join(path).is_file())
            .collect(),
        _ => {
            let mut found = Vec::new();
            walk(root, root, &mut found);
            found.sort();
            found
        }
    }
}

fn walk(root: &Path, dir: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            if !(name.starts_with('.') || name == "target" || name == "node_modules") {
                walk(root, &path, found);
            }
        } else if kind.is_file() && name.ends_with(".md") {
            found.push(path.strip_prefix(root).unwrap().to_path_buf());
        }
    }
}

/// One line per broken link: `file:line: link: what is wrong`, in file and line order.
fn check(root: &Path, files: &[PathBuf]) -> Vec<String> {
    let mut anchors: BTreeMap<PathBuf, BTreeSet<String>> = BTreeMap::new();
    let mut problems = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        let doc = Document::parse(&text);
        for (line, target) in &doc.links {
            if let Err(why) = resolve(root, file, target, &mut anchors) {
                problems.push(format!("{}:{line}: {target}: {why}", file.display()));
            }
        }
    }
    problems
}

/// Whether `target`, a link found in `file`, resolves.
fn resolve(
    root: &Path,
    file: &Path,
    target: &str,
    anchors: &mut BTreeMap<PathBuf, BTreeSet<String>>,
) -> Result<(), String> {
    let (path, fragment) = match target.split_once('#') {
        Some((path, fragment)) => (path, Some(fragment)),
        None => (target, None),
    };
    let path = path.split_once('?').map_or(path, |(path, _)| path);
    let resolved = if path.is_empty() {
        file.to_path_buf()
    } else {
        let decoded = percent_decode(path);
        let joined = match decoded.strip_prefix('/') {
            Some(from_root) => PathBuf::from(from_root),
            None => file.parent().unwrap_or(Path::new("")).join(&decoded),
        };
        normalize(&joined).ok_or_else(|| "leaves the repository".to_string())?
    };
    let on_disk = root.join(&resolved);
    if !on_disk.exists() {
        return Err("no such file".into());
    }
    let Some(fragment) = fragment.filter(|f| !f.is_empty()) else {
        return Ok(());
    };
    if !on_disk.is_file() || on_disk.extension().is_none_or(|e| e != "md") {
        return Ok(());
    }
    let known = anchors.entry(resolved.clone()).or_insert_with(|| {
        let text = std::fs::read_to_string(&on_disk).unwrap_or_default();
        Document::parse(&text).anchors
    });
    let wanted = percent_decode(fragment).to_lowercase();
    if known.contains(&wanted) {
        Ok(())
    } else {
        Err(format!(
            "no heading with the anchor `{wanted}` in {}",
            resolved.display()
        ))
    }
}

/// `a/../b/./c` as `b/c`; `None` when it climbs out of the repository.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Normal(name) => out.push(name),
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// What the checker needs of one Markdown file.
struct Document {
    /// The anchors its headings make.
    anchors: BTreeSet<String>,
    /// Its relative links, each with its 1-based line.
    links: Vec<(usize, String)>,
}

impl Document {
    fn parse(text: &str) -> Self {
        let mut anchors = BTreeSet::new();
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        let mut add_heading = |heading: &str| {
            let slug = github_slug(heading);
            let count = seen.entry(slug.clone()).or_insert(0);
            anchors.insert(if *count == 0 {
                slug
            } else {
                format!("{slug}-{count}")
            });
            *count += 1;
        };
        let mut links = Vec::new();
        let mut fence: Option<(char, usize)> = None;
        let mut previous: Option<&str> = None;
        for (index, line) in text.lines().enumerate() {
            let trimmed = line.trim_start();
            let indent = line.len() - trimmed.len();
            if let Some((mark, len)) = fence {
                let run = trimmed.chars().take_while(|c| *c == mark).count();
                if run >= len && trimmed[run..].trim().is_empty() {
                    fence = None;
                }
                previous = None;
                continue;
            }
            if let Some(mark) = ['`', '~'].into_iter().find(|m| trimmed.starts_with(*m)) {
                let run = trimmed.chars().take_while(|c| *c == mark).count();
                if run >= 3 {
                    fence = Some((mark, run));
                    previous = None;
                    continue;
                }
            }
            if indent <= 3 && trimmed.starts_with('#') {
                let level = trimmed.chars().take_while(|c| *c == '#').count();
                let rest = &trimmed[level..];
                if level <= 6 && (rest.is_empty() || rest.starts_with([' ', '\t'])) {
                    let rest = rest.trim();
                    let closed = rest.trim_end_matches('#');
                    let heading = if closed.len() < rest.len()
                        && (closed.is_empty() || closed.ends_with([' ', '\t']))
                    {
                        closed.trim_end()
                    } else {
                        rest
                    };
                    add_heading(heading);
                    previous = None;
                    continue;
                }
            }
            let underline = trimmed.trim_end();
            if indent <= 3
                && !underline.is_empty()
                && (underline.chars().all(|c| c == '=') || underline.chars().all(|c| c == '-'))
                && let Some(heading) = previous
            {
                add_heading(heading.trim());
                previous = None;
                continue;
            }
            let visible = without_code_spans(line);
            for target in inline_targets(&visible)
                .into_iter()
                .chain(reference_definition(&visible))
            {
                if !has_scheme(&target) {
                    links.push((index + 1, target));
                }
            }
            previous = (!trimmed.is_empty()
                && !trimmed.starts_with(['|', '-', '*', '>', '+'])
                && !trimmed.starts_with(|c: char| c.is_ascii_digit()))
            .then_some(line);
        }
        Document { anchors, links }
    }
}

/// The line with each code span (a run of backticks to the next run of the same length)
/// blanked, so that code showing a link is not read as one.
fn without_code_spans(line: &str) -> String {
    let chars: Vec<char> = line.chars().collect();
    let mut out = String::with_capacity(line.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let run = chars[i..].iter().take_while(|c| **c == '`').count();
        let mut j = i + run;
        let mut close = None;
        while j < chars.len() {
            if chars[j] == '`' {
                let other = chars[j..].iter().take_while(|c| **c == '`').count();
                if other == run {
                    close = Some(j);
                    break;
                }
                j += other;
            } else {
                j += 1;
            }
        }
        match close {
            Some(end) => {
                out.extend(std::iter::repeat_n(' ', end + run - i));
                i = end + run;
            }
            None => {
                out.extend(&chars[i..i + run]);
                i += run;
            }
        }
    }
    out
}

/// The destinations of the inline links and images of a line: what follows each `](`.
fn inline_targets(line: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        if let Some((target, used)) = destination(after, ')') {
            targets.push(target);
            rest = &after[used..];
        } else {
            rest = after;
        }
    }
    targets
}

/// `[label]: destination` at the start of a line.
fn reference_definition(line: &str) -> Option<String> {
    let trimmed = line.trim_start();
    if line.len() - trimmed.len() > 3 || !trimmed.starts_with('[') || trimmed.starts_with("[^") {
        return None;
    }
    let close = trimmed.find(']')?;
    let after = trimmed[close + 1..].strip_prefix(':')?.trim_start();
    destination(after, '\n').map(|(target, _)| target)
}

/// A link destination at the start of `text` (`<...>` or up to whitespace or the unbalanced
/// `end`), and how many bytes it took; `None` if there is none.
fn destination(text: &str, end: char) -> Option<(String, usize)> {
    if let Some(inner) = text.strip_prefix('<') {
        let close = inner.find('>')?;
        return Some((inner[..close].to_string(), close + 2));
    }
    let mut depth = 0usize;
    for (i, c) in text.char_indices() {
        if c.is_whitespace() || (c == end && depth == 0) {
            return (i > 0).then(|| (text[..i].to_string(), i));
        }
        match c {
            '(' => depth += 1,
            ')' => depth = depth.checked_sub(1)?,
            _ => {}
        }
    }
    (end == '\n' && !text.is_empty()).then(|| (text.to_string(), text.len()))
}

/// `https:`, `mailto:` and the like: not a file of this repository.
fn has_scheme(target: &str) -> bool {
    let Some((scheme, _)) = target.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
}

/// The anchor GitHub gives a heading: its rendered text (code spans' text, links' text, no
/// emphasis marks or HTML tags) lower-cased, with every character but letters, digits, `_`,
/// `-` and spaces dropped and each space turned into `-`.
fn github_slug(heading: &str) -> String {
    let mut text = String::with_capacity(heading.len());
    let mut chars = heading.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '`' | '*' => {}
            '<' => {
                for c in chars.by_ref() {
                    if c == '>' {
                        break;
                    }
                }
            }
            ']' if chars.peek() == Some(&'(') => {
                for c in chars.by_ref() {
                    if c == ')' {
                        break;
                    }
                }
            }
            c => text.push(c),
        }
    }
    text.to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}
