//! Checks on untrusted input (revisions and paths) and the UTF-8-safe output caps.

use crate::RepoError;

/// Longest revision expression we pass to git; real ones are far shorter.
const MAX_REV_LEN: usize = 256;
/// Longest path we accept (Linux's PATH_MAX).
const MAX_PATH_LEN: usize = 4096;

/// Rejects revision text that git could read as an option or that cannot be a revision.
///
/// The real check is `git rev-parse --verify`; this only stops input that must never reach
/// git's argument list at all.
pub(crate) fn check_rev(rev: &str) -> Result<(), RepoError> {
    let invalid = |reason: &str| RepoError::InvalidRevision {
        rev: rev.to_owned(),
        reason: reason.to_owned(),
    };
    if rev.is_empty() {
        return Err(invalid("empty revision"));
    }
    if rev.starts_with('-') {
        return Err(invalid("a revision may not start with '-'"));
    }
    if rev.len() > MAX_REV_LEN {
        return Err(invalid("longer than 256 bytes"));
    }
    if rev.chars().any(char::is_control) {
        return Err(invalid("contains a control character"));
    }
    Ok(())
}

/// Normalises a repository-relative path: drops `.` and empty components, rejects `..`,
/// absolute paths, NUL and other control characters, and a leading `-`.
///
/// Returns the empty string for the repository root (`""`, `"."`, `"./"`).
pub(crate) fn normalize_path(path: &str) -> Result<String, RepoError> {
    let invalid = |reason: &str| RepoError::InvalidPath {
        path: path.to_owned(),
        reason: reason.to_owned(),
    };
    if path.starts_with('-') {
        return Err(invalid("a path may not start with '-'"));
    }
    if path.contains('\0') {
        return Err(invalid("contains a NUL byte"));
    }
    if path.chars().any(char::is_control) {
        return Err(invalid("contains a control character"));
    }
    if path.len() > MAX_PATH_LEN {
        return Err(invalid("longer than 4096 bytes"));
    }
    if path.starts_with('/') || path.starts_with('\\') || has_drive_prefix(path) {
        return Err(RepoError::PathEscapes {
            path: path.to_owned(),
        });
    }
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            // Even `a/../b` is refused: resolving it lexically would be right for git's trees,
            // but an agent that writes `..` is asking for something we do not offer.
            ".." => {
                return Err(RepoError::PathEscapes {
                    path: path.to_owned(),
                });
            }
            _ => parts.push(part),
        }
    }
    if parts.first().is_some_and(|first| first.starts_with('-')) {
        return Err(invalid("a path may not start with '-'"));
    }
    // `.git` is git's own storage, never content of a tree; refusing it keeps the views from
    // ever being pointed at repository internals.
    if parts.iter().any(|p| p.eq_ignore_ascii_case(".git")) {
        return Err(invalid("'.git' is not part of the repository's content"));
    }
    Ok(parts.join("/"))
}

/// `C:` style prefixes: harmless on Unix, but never a repository-relative path either.
fn has_drive_prefix(path: &str) -> bool {
    let bytes = path.as_bytes();
    bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':'
}

/// Decodes `bytes` lossily and caps the text at `max` bytes on a character boundary.
///
/// `more` says whether the input was already cut short upstream. Returns the text and whether
/// anything was left out.
pub(crate) fn cap_text(bytes: &[u8], max: usize, more: bool) -> (String, bool) {
    let mut end = bytes.len().min(max);
    let mut truncated = more || end < bytes.len();
    end = incomplete_tail_start(&bytes[..end]);
    let mut text = String::from_utf8_lossy(&bytes[..end]).into_owned();
    // Replacement characters are 3 bytes for what may have been 1 invalid byte, so the decoded
    // text can be longer than its input.
    if text.len() > max {
        let mut cut = max;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        truncated = true;
    }
    (text, truncated)
}

/// If `bytes` ends inside a multi-byte UTF-8 sequence, returns where that sequence starts;
/// otherwise `bytes.len()`.
fn incomplete_tail_start(bytes: &[u8]) -> usize {
    let len = bytes.len();
    // A sequence is at most 4 bytes, so its lead byte is within the last 4.
    for back in 1..=len.min(4) {
        let i = len - back;
        let byte = bytes[i];
        if byte & 0b1100_0000 == 0b1000_0000 {
            continue; // continuation byte: keep looking for the lead
        }
        let width = match byte {
            0x00..=0x7f => 1,
            0xc0..=0xdf => 2,
            0xe0..=0xef => 3,
            0xf0..=0xf7 => 4,
            _ => 1, // invalid lead: lossy decoding deals with it
        };
        return if i + width > len { i } else { len };
    }
    len
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revisions_starting_with_dash_are_rejected() {
        assert!(matches!(
            check_rev("--output=/tmp/x"),
            Err(RepoError::InvalidRevision { .. })
        ));
        assert!(check_rev("").is_err());
        assert!(check_rev("HEAD\nx").is_err());
        assert!(check_rev("HEAD~2").is_ok());
    }

    #[test]
    fn paths_are_normalised_to_root_relative_form() {
        assert_eq!(normalize_path("./a//b/./c/").unwrap(), "a/b/c");
        assert_eq!(normalize_path(".").unwrap(), "");
        assert_eq!(normalize_path("").unwrap(), "");
        assert_eq!(
            normalize_path("dir with space/é.txt").unwrap(),
            "dir with space/é.txt"
        );
    }

    #[test]
    fn escaping_and_absolute_paths_are_rejected() {
        for bad in ["../x", "a/../../x", "a/..", "/etc/passwd", "C:/x", "\\x"] {
            assert!(
                matches!(normalize_path(bad), Err(RepoError::PathEscapes { .. })),
                "{bad} accepted"
            );
        }
        for bad in ["-x", "./-x", "a\0b", "a\nb", ".git/config", "x/.GIT/HEAD"] {
            assert!(
                matches!(normalize_path(bad), Err(RepoError::InvalidPath { .. })),
                "{bad} accepted"
            );
        }
    }

    #[test]
    fn capping_never_splits_a_character() {
        let text = "aé€😀".as_bytes(); // 1 + 2 + 3 + 4 bytes
        for max in 0..=text.len() {
            let (capped, truncated) = cap_text(text, max, false);
            assert!(capped.len() <= max);
            assert!(!capped.contains('\u{fffd}'), "split at {max}: {capped:?}");
            assert_eq!(truncated, max < text.len());
        }
    }

    #[test]
    fn capping_keeps_invalid_bytes_lossy_and_within_the_limit() {
        let (text, truncated) = cap_text(b"ab\xffcd", 4, false);
        assert!(text.len() <= 4);
        assert!(truncated);
        let (text, truncated) = cap_text(b"ab\xff", 10, false);
        assert_eq!(text, "ab\u{fffd}");
        assert!(!truncated);
    }
}
