use std::path::PathBuf;

/// Everything that can go wrong in this crate.
///
/// Each variant has a stable snake_case code (see [`SearchError::code`]) so callers can map it to
/// a tool error without matching on message text.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SearchError {
    /// The underlying tantivy index failed (I/O in the RAM directory, a worker thread died...).
    #[error("search index error: {0}")]
    Index(#[from] tantivy::TantivyError),
    /// A document id was empty or too long to be stored as a single index term.
    #[error("invalid document id: {reason}")]
    InvalidId {
        /// What is wrong with the id.
        reason: String,
    },
    /// The `path_glob` given to a search did not parse.
    #[error("invalid path glob `{glob}`: {source}")]
    InvalidGlob {
        /// The glob exactly as the caller passed it.
        glob: String,
        /// The parser's explanation.
        #[source]
        source: globset::Error,
    },
    /// A declaration kind filter named no kind this crate reports.
    #[error("unknown declaration kind `{kind}` (known kinds: {known})")]
    UnknownKind {
        /// The kind exactly as the caller passed it.
        kind: String,
        /// The accepted kinds, comma-separated.
        known: String,
    },
    /// The caller's [`crate::Observer`] asked the refresh to stop.
    #[error("cancelled")]
    Cancelled,
    /// The workspace root is missing or is not a directory.
    #[error("workspace root {} is not a readable directory: {source}", path.display())]
    Root {
        /// The root given to [`crate::WorkspaceIndex::new`].
        path: PathBuf,
        /// Why it could not be used.
        #[source]
        source: std::io::Error,
    },
}

impl SearchError {
    /// A stable snake_case code for this error, suitable for tool error payloads.
    pub fn code(&self) -> &'static str {
        match self {
            SearchError::Index(_) => "search_index_error",
            SearchError::InvalidId { .. } => "search_invalid_id",
            SearchError::InvalidGlob { .. } => "search_invalid_glob",
            SearchError::UnknownKind { .. } => "search_unknown_kind",
            SearchError::Root { .. } => "search_root_unreadable",
            SearchError::Cancelled => "search_cancelled",
        }
    }

    /// True when the caller's input was at fault (bad id, glob or kind), as opposed to an
    /// index or file-system failure: map it to an invalid-arguments tool error.
    pub fn is_invalid_input(&self) -> bool {
        matches!(
            self,
            SearchError::InvalidId { .. }
                | SearchError::InvalidGlob { .. }
                | SearchError::UnknownKind { .. }
        )
    }
}

/// The result type of this crate.
pub type Result<T> = std::result::Result<T, SearchError>;
