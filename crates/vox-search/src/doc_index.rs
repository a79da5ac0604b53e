//! [`DocIndex`]: an in-RAM BM25 index of `(id, title, body)` documents.

use serde::Serialize;
use tantivy::query::QueryParser;
use tantivy::schema::{Field, STORED, STRING, Schema, TEXT, Value};
use tantivy::snippet::{Snippet, SnippetGenerator};
use tantivy::{Index, TantivyDocument, Term, doc};

use crate::util::{cap_query, clamp_limit, lenient_query, stable_top_docs, truncate_chars};
use crate::writer::LazyWriter;
use crate::{Result, SearchError};

/// Longest accepted document id, in bytes; ids are stored as one index term.
pub const MAX_ID_BYTES: usize = 1_024;
/// Longest snippet, in characters (before the `**` markers are added).
const SNIPPET_CHARS: usize = 200;
/// Title matches count this much more than body matches.
const TITLE_BOOST: f32 = 2.0;

/// One search hit of a [`DocIndex`].
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct DocHit {
    /// The id given at upsert.
    pub id: String,
    /// BM25 score (higher is better); only comparable within one search.
    pub score: f32,
    /// A short plain-text excerpt of the body with matched words marked `**like this**`.
    pub snippet: String,
}

#[derive(Clone, Copy)]
struct Fields {
    id: Field,
    title: Field,
    body: Field,
}

/// An in-RAM BM25 index of documents keyed by id (knowledge base, memories).
///
/// Thread-safe: writes are serialised internally, searches run concurrently with them and see
/// every write that returned before they started.
pub struct DocIndex {
    store: LazyWriter,
    fields: Fields,
    parser: QueryParser,
}

impl DocIndex {
    /// Creates an empty index. Cheap: no writer (and no indexing memory) until the first write.
    pub fn new() -> Result<Self> {
        let mut builder = Schema::builder();
        let fields = Fields {
            id: builder.add_text_field("id", STRING | STORED),
            title: builder.add_text_field("title", TEXT),
            // Stored only for snippets.
            body: builder.add_text_field("body", TEXT | STORED),
        };
        let index = Index::create_in_ram(builder.build());
        let mut parser = QueryParser::for_index(&index, vec![fields.title, fields.body]);
        parser.set_field_boost(fields.title, TITLE_BOOST);
        Ok(DocIndex {
            store: LazyWriter::new(index)?,
            fields,
            parser,
        })
    }

    /// Inserts the document or replaces the one with the same id; visible to searches on return.
    pub fn upsert(&self, id: &str, title: &str, body: &str) -> Result<()> {
        check_id(id)?;
        let f = self.fields;
        self.store.write(|writer| {
            writer.delete_term(Term::from_field_text(f.id, id));
            writer.add_document(doc!(f.id => id, f.title => title, f.body => body))?;
            Ok(())
        })
    }

    /// Upserts many documents `(id, title, body)` in one commit; the last one wins for a
    /// repeated id. Nothing is written if any id is invalid.
    pub fn upsert_many(
        &self,
        docs: impl IntoIterator<Item = (String, String, String)>,
    ) -> Result<()> {
        let docs: Vec<(String, String, String)> = docs.into_iter().collect();
        for (id, _, _) in &docs {
            check_id(id)?;
        }
        if docs.is_empty() {
            return Ok(());
        }
        let f = self.fields;
        self.store.write(|writer| {
            for (id, title, body) in docs {
                // Delete-then-add in operation order: a later duplicate deletes the earlier one.
                writer.delete_term(Term::from_field_text(f.id, &id));
                writer.add_document(doc!(f.id => id, f.title => title, f.body => body))?;
            }
            Ok(())
        })
    }

    /// Removes the document with this id (no error if there is none).
    pub fn delete(&self, id: &str) -> Result<()> {
        check_id(id)?;
        let f = self.fields;
        self.store.write(|writer| {
            writer.delete_term(Term::from_field_text(f.id, id));
            Ok(())
        })
    }

    /// Number of live documents.
    pub fn len(&self) -> u64 {
        self.store.reader().searcher().num_docs()
    }

    /// True when the index holds no documents.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Searches titles and bodies (titles boosted). The query uses tantivy's syntax but is parsed
    /// leniently, so any text is accepted; it is cut to 1,000 characters and `limit` to 100.
    /// Hits are ordered by score, then id.
    pub fn search(&self, query: &str, limit: usize) -> Result<Vec<DocHit>> {
        let query = cap_query(query);
        let limit = clamp_limit(limit);
        if query.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let searcher = self.store.reader().searcher();
        let parsed = lenient_query(&self.parser, &searcher, query);
        let f = self.fields;
        let hits = stable_top_docs(&searcher, &*parsed, limit, |address| {
            let doc: TantivyDocument = searcher.doc(address)?;
            Ok(stored_text(&doc, f.id))
        })?;
        let mut generator = SnippetGenerator::create(&searcher, &*parsed, f.body)?;
        generator.set_max_num_chars(SNIPPET_CHARS);
        let mut out = Vec::with_capacity(hits.len());
        for (score, id, address) in hits {
            let doc: TantivyDocument = searcher.doc(address)?;
            let body = stored_text(&doc, f.body);
            let snippet = generator.snippet(&body);
            let snippet = if snippet.is_empty() {
                // The match was in the title only: show the start of the body instead.
                truncate_chars(body.trim(), SNIPPET_CHARS)
            } else {
                mark_snippet(&snippet)
            };
            out.push(DocHit { id, score, snippet });
        }
        Ok(out)
    }
}

fn check_id(id: &str) -> Result<()> {
    if id.is_empty() {
        return Err(SearchError::InvalidId {
            reason: "the id is empty".into(),
        });
    }
    if id.len() > MAX_ID_BYTES {
        return Err(SearchError::InvalidId {
            reason: format!(
                "the id is {} bytes long, the limit is {MAX_ID_BYTES}",
                id.len()
            ),
        });
    }
    Ok(())
}

fn stored_text(doc: &TantivyDocument, field: Field) -> String {
    doc.get_first(field)
        .and_then(|value| value.as_str())
        .unwrap_or_default()
        .to_string()
}

/// Renders a snippet as plain text with highlights wrapped in `**` (tantivy's own renderer
/// emits HTML, which would escape `<` and `&` in code).
fn mark_snippet(snippet: &Snippet) -> String {
    let fragment = snippet.fragment();
    let mut out = String::with_capacity(fragment.len() + 16);
    let mut cursor = 0;
    for range in snippet.highlighted() {
        // Ranges come from tantivy's tokenizer on this very fragment; `get` keeps us panic-free
        // should one ever fall off a char boundary.
        let (Some(before), Some(marked)) = (
            fragment.get(cursor..range.start),
            fragment.get(range.start..range.end),
        ) else {
            continue;
        };
        out.push_str(before);
        out.push_str("**");
        out.push_str(marked);
        out.push_str("**");
        cursor = range.end;
    }
    out.push_str(fragment.get(cursor..).unwrap_or_default());
    out.trim().to_string()
}
