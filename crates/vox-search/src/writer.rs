//! A lazily created, minimal tantivy writer shared by both indexes.

use std::sync::{Mutex, MutexGuard, PoisonError};

use tantivy::indexer::{IndexWriter, IndexWriterOptions};
use tantivy::{Index, IndexReader, ReloadPolicy};

use crate::Result;

/// tantivy's smallest accepted per-thread indexing budget (15 MB, not re-exported by tantivy);
/// a smaller value is rejected when the writer is created.
const MIN_WRITER_BUDGET: usize = 15_000_000;

/// Owns the index, its reader and a writer created on the first write.
///
/// tantivy's per-thread arena is only allocated while a segment is being built, but the writer
/// also spawns worker and merge threads; creating it on first use keeps a never-written index
/// (the common case for an unused tool) at a few kilobytes and no extra threads. One indexing
/// thread and one merge thread at the minimum budget: the machine is shared, and our batches
/// are small.
pub struct LazyWriter {
    index: Index,
    reader: IndexReader,
    writer: Mutex<Option<IndexWriter>>,
}

impl LazyWriter {
    /// Wraps `index` with a manually reloaded reader (writes reload it before returning).
    pub fn new(index: Index) -> Result<Self> {
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        Ok(LazyWriter {
            index,
            reader,
            writer: Mutex::new(None),
        })
    }

    /// The reader; searches take a fresh searcher from it.
    pub fn reader(&self) -> &IndexReader {
        &self.reader
    }

    /// Runs `edit` with exclusive access to the writer, then commits and reloads the reader so
    /// the edit is visible to every search started after this returns. On error the pending
    /// operations are rolled back so a half-applied batch is never committed later.
    pub fn write<T>(&self, edit: impl FnOnce(&IndexWriter) -> Result<T>) -> Result<T> {
        let mut guard = self.lock();
        let writer = match guard.take() {
            Some(writer) => writer,
            None => self.index.writer_with_options(
                IndexWriterOptions::builder()
                    .memory_budget_per_thread(MIN_WRITER_BUDGET)
                    .num_worker_threads(1)
                    .num_merge_threads(1)
                    .build(),
            )?,
        };
        let mut writer = writer;
        let outcome = edit(&writer).and_then(|value| {
            writer.commit()?;
            Ok(value)
        });
        match outcome {
            Ok(value) => {
                *guard = Some(writer);
                self.reader.reload()?;
                Ok(value)
            }
            Err(err) => {
                // A writer whose commit failed may be unusable; keep it only if rollback works.
                if writer.rollback().is_ok() {
                    *guard = Some(writer);
                }
                Err(err)
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<IndexWriter>> {
        // Nothing in the critical section panics on purpose; if something did, the writer state
        // is still tantivy's own consistent state, so recover rather than poison every caller.
        self.writer.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use tantivy::doc;
    use tantivy::schema::{Schema, TEXT};

    use super::*;

    fn has_writer(store: &LazyWriter) -> bool {
        store.lock().is_some()
    }

    #[test]
    fn writer_is_created_on_first_write_only_and_reused() {
        let mut builder = Schema::builder();
        let text = builder.add_text_field("text", TEXT);
        let store = LazyWriter::new(Index::create_in_ram(builder.build())).unwrap();
        assert!(
            !has_writer(&store),
            "an unwritten index must not hold a writer"
        );
        assert_eq!(store.reader().searcher().num_docs(), 0);
        store
            .write(|w| {
                w.add_document(doc!(text => "one"))?;
                Ok(())
            })
            .unwrap();
        assert!(has_writer(&store));
        assert_eq!(store.reader().searcher().num_docs(), 1, "visible on return");
    }

    #[test]
    fn failed_edit_is_rolled_back_and_not_committed_later() {
        let mut builder = Schema::builder();
        let text = builder.add_text_field("text", TEXT);
        let store = LazyWriter::new(Index::create_in_ram(builder.build())).unwrap();
        let failed: Result<()> = store.write(|w| {
            w.add_document(doc!(text => "half"))?;
            Err(crate::SearchError::InvalidId {
                reason: "test failure".into(),
            })
        });
        assert!(failed.is_err());
        store.write(|_| Ok(())).unwrap();
        assert_eq!(store.reader().searcher().num_docs(), 0);
    }
}
