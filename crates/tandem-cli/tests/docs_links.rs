//! The documentation's links: every relative link in README.md and in the
//! book under docs/ must name a file that exists (and, with `#anchor`, a
//! heading of that file), links in the book must stay inside the book
//! (mdBook renders only docs/src/), and every chapter in docs/src/ must be
//! listed in docs/src/SUMMARY.md. Links to web addresses are not followed.
//!
//! The checks are plain functions over a directory, so the tests at the end
//! also run them on small made-up trees to show that they fail where they
//! should.

use std::collections::{BTreeSet, HashMap};
use std::fs;
use std::path::{Component, Path, PathBuf};

/// The repository's top directory.
fn repo_root() -> PathBuf {
    normalize(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
}

/// A link found in a Markdown file: its target as written and its line.
#[derive(Debug)]
struct Link {
    target: String,
    line: usize,
}

/// Lines of `text` outside fenced code blocks, with their 1-based numbers,
/// and with inline code spans blanked out.
fn prose_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fence: Option<String> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if let Some(open) = &fence {
            if trimmed.starts_with(open.as_str()) {
                fence = None;
            }
            continue;
        }
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fence = Some(trimmed[..3].to_string());
            continue;
        }
        out.push((i + 1, blank_code_spans(line)));
    }
    out
}

/// `line` with every inline code span (`...`) replaced by spaces.
fn blank_code_spans(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut in_code = false;
    for c in line.chars() {
        if c == '`' {
            in_code = !in_code;
            out.push(' ');
        } else if in_code {
            out.push(' ');
        } else {
            out.push(c);
        }
    }
    out
}

/// Inline links and images (`[text](target)`, `![alt](target "title")`)
/// and reference definitions (`[label]: target`).
fn links(text: &str) -> Vec<Link> {
    let mut found = Vec::new();
    for (line_no, line) in prose_lines(text) {
        let bytes = line.as_bytes();
        let mut i = 0;
        while let Some(pos) = line[i..].find("](") {
            let start = i + pos + 2;
            let mut depth = 0usize;
            let mut end = None;
            for (j, &b) in bytes.iter().enumerate().skip(start) {
                match b {
                    b'(' => depth += 1,
                    b')' if depth == 0 => {
                        end = Some(j);
                        break;
                    }
                    b')' => depth -= 1,
                    _ => {}
                }
            }
            let Some(end) = end else { break };
            let inside = line[start..end].trim();
            let target = inside
                .trim_start_matches('<')
                .split(['>', ' '])
                .next()
                .unwrap_or("");
            found.push(Link {
                target: target.to_string(),
                line: line_no,
            });
            i = end;
        }
        let t = line.trim_start();
        if t.starts_with('[') {
            if let Some(close) = t.find("]:") {
                let target = t[close + 2..].split_whitespace().next().unwrap_or("");
                found.push(Link {
                    target: target.to_string(),
                    line: line_no,
                });
            }
        }
    }
    found
}

/// A heading's anchor as mdBook (and GitHub) make it: lower case, letters,
/// digits, `-` and `_` kept, white space turned into `-`, the rest dropped.
fn anchor_of(heading: &str) -> String {
    heading
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                Some(c.to_lowercase().next().unwrap_or(c))
            } else if c.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

/// The anchors of a Markdown file's headings (a repeated heading's later
/// anchors get `-1`, `-2`, ...).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = BTreeSet::new();
    for (_, line) in prose_lines(text) {
        let t = line.trim_start();
        if !t.starts_with('#') {
            continue;
        }
        let title = t.trim_start_matches('#');
        if !title.starts_with(' ') {
            continue;
        }
        let base = anchor_of(title.trim());
        let n = seen.entry(base.clone()).or_insert(0);
        let id = if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        };
        *n += 1;
        out.insert(id);
    }
    out
}

/// `path` with `.` and `..` resolved without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

fn is_external(target: &str) -> bool {
    target.contains("://") || target.starts_with("mailto:") || target.is_empty()
}

/// Problems with the links of one Markdown file. `confine`: links must
/// stay inside this directory (the book's source).
fn check_file(file: &Path, confine: Option<&Path>) -> Vec<String> {
    let text = match fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) => return vec![format!("{}: cannot read: {e}", file.display())],
    };
    let dir = file.parent().unwrap_or(Path::new("."));
    let mut problems = Vec::new();
    for link in links(&text) {
        if is_external(&link.target) {
            continue;
        }
        let (path_part, fragment) = match link.target.split_once('#') {
            Some((p, f)) => (p, Some(f)),
            None => (link.target.as_str(), None),
        };
        let where_ = format!("{}:{}", file.display(), link.line);
        let target = if path_part.is_empty() {
            file.to_path_buf()
        } else {
            normalize(&dir.join(path_part))
        };
        if let Some(root) = confine {
            if !target.starts_with(normalize(root)) {
                problems.push(format!(
                    "{where_}: link '{}' leaves the book's source directory (mdBook does not render it)",
                    link.target
                ));
                continue;
            }
        }
        if !target.exists() {
            problems.push(format!(
                "{where_}: link '{}': no such file {}",
                link.target,
                target.display()
            ));
            continue;
        }
        if let Some(fragment) = fragment {
            if target.extension().is_some_and(|e| e == "md") {
                let their = fs::read_to_string(&target).unwrap_or_default();
                if !anchors(&their).contains(fragment) {
                    problems.push(format!(
                        "{where_}: link '{}': {} has no heading with anchor '#{fragment}'",
                        link.target,
                        target.display()
                    ));
                }
            }
        }
    }
    problems
}

/// Every `.md` file under `dir`, sorted.
fn markdown_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "md") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Problems with a book: `book_dir` holds book.toml and src/SUMMARY.md;
/// every chapter under src/ must be in the summary, and every link of every
/// chapter must resolve inside src/.
fn check_book(book_dir: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    if !book_dir.join("book.toml").is_file() {
        problems.push(format!("{}: no book.toml", book_dir.display()));
    }
    let src = book_dir.join("src");
    let summary_path = src.join("SUMMARY.md");
    let summary = match fs::read_to_string(&summary_path) {
        Ok(s) => s,
        Err(e) => {
            problems.push(format!("{}: cannot read: {e}", summary_path.display()));
            return problems;
        }
    };
    let listed: BTreeSet<PathBuf> = links(&summary)
        .iter()
        .filter(|l| !is_external(&l.target))
        .map(|l| normalize(&src.join(l.target.split('#').next().unwrap_or(""))))
        .collect();
    for chapter in markdown_files(&src) {
        let chapter = normalize(&chapter);
        if chapter != normalize(&summary_path) && !listed.contains(&chapter) {
            problems.push(format!(
                "{}: not listed in {}",
                chapter.display(),
                summary_path.display()
            ));
        }
    }
    for file in markdown_files(&src) {
        problems.extend(check_file(&file, Some(&src)));
    }
    problems
}

#[test]
fn readme_and_book_links_resolve() {
    let root = repo_root();
    let mut problems = check_file(&root.join("README.md"), None);
    problems.extend(check_book(&root.join("docs")));
    assert!(
        problems.is_empty(),
        "broken documentation links:\n{}",
        problems.join("\n")
    );
}

/// A made-up tree under the system's temporary directory, removed at drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("tandem-docs-links-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("docs/src")).unwrap();
        fs::write(dir.join("docs/book.toml"), "[book]\nsrc = \"src\"\n").unwrap();
        Scratch(dir)
    }
    fn write(&self, rel: &str, text: &str) {
        fs::write(self.0.join(rel), text).unwrap();
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

#[test]
fn a_good_book_passes() {
    let s = Scratch::new("good");
    s.write(
        "docs/src/SUMMARY.md",
        "# Summary\n\n- [A](a.md)\n- [B](b.md)\n",
    );
    s.write(
        "docs/src/a.md",
        "# A\n\nSee [b's part](b.md#the-part-two) and [here](#a).\n\n```\n[not a link](nowhere.md)\n```\n`[nor this](x.md)`\n",
    );
    s.write("docs/src/b.md", "# B\n\n## The part (two)\n");
    s.write(
        "README.md",
        "[book](docs/src/a.md) [web](https://example.org/x.md)\n",
    );
    assert_eq!(check_book(&s.0.join("docs")), Vec::<String>::new());
    assert_eq!(
        check_file(&s.0.join("README.md"), None),
        Vec::<String>::new()
    );
}

#[test]
fn a_broken_link_fails() {
    let s = Scratch::new("broken");
    s.write("docs/src/SUMMARY.md", "# Summary\n\n- [A](a.md)\n");
    s.write("docs/src/a.md", "# A\n\nSee [gone](gone.md).\n");
    let problems = check_book(&s.0.join("docs"));
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("gone.md"), "{problems:?}");
    s.write("README.md", "[gone](docs/src/nope.md)\n");
    assert_eq!(check_file(&s.0.join("README.md"), None).len(), 1);
}

#[test]
fn a_missing_anchor_fails() {
    let s = Scratch::new("anchor");
    s.write("docs/src/SUMMARY.md", "# Summary\n\n- [A](a.md)\n");
    s.write("docs/src/a.md", "# A\n\n[x](a.md#no-such-heading)\n");
    let problems = check_book(&s.0.join("docs"));
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("no-such-heading"), "{problems:?}");
}

#[test]
fn a_chapter_missing_from_the_summary_fails() {
    let s = Scratch::new("summary");
    s.write("docs/src/SUMMARY.md", "# Summary\n\n- [A](a.md)\n");
    s.write("docs/src/a.md", "# A\n");
    s.write("docs/src/orphan.md", "# Orphan\n");
    let problems = check_book(&s.0.join("docs"));
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("orphan.md"), "{problems:?}");
}

#[test]
fn a_summary_entry_without_its_file_fails() {
    let s = Scratch::new("entry");
    s.write(
        "docs/src/SUMMARY.md",
        "# Summary\n\n- [A](a.md)\n- [B](b.md)\n",
    );
    s.write("docs/src/a.md", "# A\n");
    let problems = check_book(&s.0.join("docs"));
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("b.md"), "{problems:?}");
}

#[test]
fn a_link_out_of_the_book_fails() {
    let s = Scratch::new("escape");
    s.write("docs/src/SUMMARY.md", "# Summary\n\n- [A](a.md)\n");
    s.write("README.md", "# R\n");
    s.write("docs/src/a.md", "# A\n\n[readme](../../README.md)\n");
    let problems = check_book(&s.0.join("docs"));
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("leaves the book"), "{problems:?}");
}
