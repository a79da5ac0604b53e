//! Full-text (BM25) search for vox, backed by tantivy indexes held in RAM.
//!
//! - [`DocIndex`]: documents `(id, title, body)` upserted by the caller (knowledge base,
//!   memories); backs `vox_kb_query`, `vox_memory_search` and `vox_knowledge_query`.
//! - [`WorkspaceIndex`]: the text files of a workspace directory and the code declarations in
//!   them, refreshed incrementally before each search; backs `vox_search_text` and
//!   `vox_search_structural`.
//!
//! Both take `&self` everywhere and synchronise internally, so one instance can be shared
//! (`Arc`) between handlers. Query text is user input: it is parsed leniently, never rejected
//! for its syntax, and capped in length; result counts are capped at [`MAX_LIMIT`]. Equal
//! scores come back in a stable order.

#![warn(missing_docs)]

mod declarations;
mod doc_index;
mod error;
mod util;
mod workspace;
mod writer;

pub use doc_index::{DocHit, DocIndex, MAX_ID_BYTES};
pub use error::{Result, SearchError};
pub use util::{MAX_LIMIT, MAX_QUERY_CHARS};
pub use workspace::{
    ALWAYS_SKIPPED_DIRS, BINARY_SNIFF_BYTES, DeclarationHit, FileHit, LineMatch, MAX_FILE_BYTES,
    MAX_FILES, Observer, RefreshStats, WorkspaceIndex,
};

#[cfg(test)]
mod send_sync {
    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn public_types_are_send_and_sync() {
        assert_send_sync::<super::DocIndex>();
        assert_send_sync::<super::WorkspaceIndex>();
        assert_send_sync::<super::SearchError>();
    }
}
