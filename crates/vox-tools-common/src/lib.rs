//! What vox's tool families share, below every family crate: the journey store ([`store`]: the
//! `db` boot step and the accessors every durable family uses) and the argument checks.

pub mod store;

use vox_core::{Family, ToolError};

/// This crate's family (the store), first of those `vox_tools::families()` assembles.
pub fn families() -> Vec<Family> {
    vec![store::family()]
}

/// A relative path of plain names only (no root, no `.` or `..`): it stays under the directory
/// it is joined to, symlinks aside.
pub fn is_plain_relative(p: &std::path::Path) -> bool {
    !p.as_os_str().is_empty()
        && p.components()
            .all(|c| matches!(c, std::path::Component::Normal(_)))
}

/// Checks a bounded, non-empty string argument.
pub fn bounded(name: &str, v: &str, max: usize) -> Result<(), ToolError> {
    if v.trim().is_empty() {
        return Err(ToolError::invalid_arguments(format!(
            "`{name}` must not be empty"
        )));
    }
    if v.len() > max {
        return Err(ToolError::invalid_arguments(format!(
            "`{name}` is {} bytes; the limit is {max}",
            v.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn plain_relative_paths_have_only_names() {
        assert!(is_plain_relative(Path::new("docs/a.md")));
        for bad in ["", "/etc/passwd", "../x", "a/../b", "./a"] {
            assert!(!is_plain_relative(Path::new(bad)), "{bad}");
        }
    }

    #[test]
    fn bounded_refuses_blank_and_long_values_naming_the_argument() {
        assert!(bounded("title", "ok", 2).is_ok());
        let e = bounded("title", "  ", 10).unwrap_err();
        assert_eq!(e.code(), "invalid_arguments");
        assert!(e.to_string().contains("`title`"), "{e}");
        let e = bounded("title", "abc", 2).unwrap_err();
        assert!(e.to_string().contains("3 bytes; the limit is 2"), "{e}");
    }
}
