//! The project cites only itself. Its comments, docs and test names point at docs/rules.md's rule
//! ids (P1-P12, M1) and the pages of docs/, never at the behaviour contract the project was built
//! from nor at a tracker's issue numbers: a reader of the repository has neither.

use std::path::Path;
use std::process::Command;

/// The contract's name, in capitals, spelled in two halves so that this file does not cite it.
const CONTRACT: &str = concat!("SP", "EC");

/// Every citation in `text`, as (line, the words cited): the contract's name as a word (with `.md`,
/// `'s`, a section or a rule after it), or `issue`/`issues` followed by a number, also where a
/// comment wraps between the two.
fn citations(text: &str) -> Vec<(usize, String)> {
    let words: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .flat_map(|(at, line)| line.split_whitespace().map(move |word| (at + 1, word)))
        // A comment's markers where a sentence wraps: `//`, `///`, `//!`, `#`, `*`, `-`.
        .filter(|(_, word)| !word.chars().all(|c| matches!(c, '/' | '!' | '#' | '*' | '-')))
        .collect();
    let mut found = Vec::new();
    for (index, &(line, word)) in words.iter().enumerate() {
        let bare = word.trim_start_matches(|c: char| !c.is_alphanumeric());
        let names_contract = bare
            .strip_prefix(CONTRACT)
            .is_some_and(|rest| !rest.starts_with(|c: char| c.is_alphanumeric() || c == '_'));
        let issue = bare.to_lowercase();
        let issue = issue.trim_end_matches(|c: char| !c.is_alphanumeric());
        let numbered = matches!(issue, "issue" | "issues")
            && words
                .get(index + 1)
                .is_some_and(|(_, next)| next.trim_start_matches('#').starts_with(|c: char| c.is_ascii_digit()));
        if names_contract || numbered {
            let next = words.get(index + 1).map_or("", |(_, next)| next);
            found.push((line, format!("{word} {next}")));
        }
    }
    found
}

#[test]
fn a_citation_is_found_where_a_comment_wraps_and_not_in_other_words() {
    let text = [
        "// a spread constraint (see the",
        "// issue",
        "// 21): not this project's",
        &format!("/// {CONTRACT}'s order; {CONTRACT}_FIELD, a {CONTRACT}IAL issue, issues of 2"),
        &format!("# ({CONTRACT} P5) and Issue {}7, {} 11 and 22", '#', "issues"),
    ]
    .join("\n");
    let cited: Vec<usize> = citations(&text).into_iter().map(|(line, _)| line).collect();
    assert_eq!(cited, [2, 4, 5, 5, 5]);
}

/// Every file git tracks (the worktree's copy), text only: a file that is not UTF-8 (an image) or
/// no longer exists in the worktree is skipped.
#[test]
fn no_tracked_file_cites_the_contract_or_an_issue() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let listed = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(root)
        .output()
        .expect("git ls-files runs");
    assert!(
        listed.status.success(),
        "git ls-files: {}",
        String::from_utf8_lossy(&listed.stderr)
    );
    let mut cited = Vec::new();
    let mut files = 0;
    for file in String::from_utf8(listed.stdout)
        .expect("UTF-8 paths")
        .split_terminator('\0')
    {
        let Ok(text) = std::fs::read_to_string(root.join(file)) else {
            continue;
        };
        files += 1;
        for (line, words) in citations(&text) {
            cited.push(format!("{file}:{line}: {words}"));
        }
    }
    assert!(files > 100, "only {files} tracked text files found");
    assert!(cited.is_empty(), "{} citations:\n{}", cited.len(), cited.join("\n"));
}
