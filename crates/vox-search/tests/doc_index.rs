//! Behaviour of the in-RAM document index.

use std::sync::Arc;

use vox_search::{DocIndex, MAX_LIMIT, SearchError};

fn ids(hits: &[vox_search::DocHit]) -> Vec<&str> {
    hits.iter().map(|h| h.id.as_str()).collect()
}

#[test]
fn upserted_document_is_searchable_immediately() {
    let index = DocIndex::new().unwrap();
    assert!(index.is_empty());
    index
        .upsert(
            "kb-1",
            "Daemon adoption",
            "Take a flock before spawning the daemon.",
        )
        .unwrap();
    assert_eq!(index.len(), 1);
    let hits = index.search("flock", 10).unwrap();
    assert_eq!(ids(&hits), ["kb-1"]);
    assert!(hits[0].score > 0.0);
}

#[test]
fn upsert_replaces_the_document_with_the_same_id() {
    let index = DocIndex::new().unwrap();
    index.upsert("a", "old title", "apples").unwrap();
    index.upsert("a", "new title", "bananas").unwrap();
    assert_eq!(index.len(), 1);
    assert!(index.search("apples", 10).unwrap().is_empty());
    assert_eq!(ids(&index.search("bananas", 10).unwrap()), ["a"]);
}

#[test]
fn upsert_many_commits_all_and_last_duplicate_wins() {
    let index = DocIndex::new().unwrap();
    index
        .upsert_many(vec![
            ("x".into(), "t".into(), "first version".into()),
            ("y".into(), "t".into(), "other".into()),
            ("x".into(), "t".into(), "second version".into()),
        ])
        .unwrap();
    assert_eq!(index.len(), 2);
    assert!(index.search("first", 10).unwrap().is_empty());
    assert_eq!(ids(&index.search("second", 10).unwrap()), ["x"]);
}

#[test]
fn upsert_many_with_an_invalid_id_writes_nothing() {
    let index = DocIndex::new().unwrap();
    let err = index
        .upsert_many(vec![
            ("ok".into(), "t".into(), "body".into()),
            (String::new(), "t".into(), "body".into()),
        ])
        .unwrap_err();
    assert!(matches!(err, SearchError::InvalidId { .. }), "{err}");
    assert_eq!(err.code(), "search_invalid_id");
    assert!(err.is_invalid_input());
    assert_eq!(index.len(), 0);
}

#[test]
fn overlong_id_is_rejected_with_its_length() {
    let index = DocIndex::new().unwrap();
    let err = index.upsert(&"x".repeat(5000), "t", "b").unwrap_err();
    assert!(err.to_string().contains("5000 bytes"), "{err}");
}

#[test]
fn delete_removes_the_document() {
    let index = DocIndex::new().unwrap();
    index.upsert("gone", "t", "ephemeral words").unwrap();
    index.upsert("kept", "t", "ephemeral too").unwrap();
    index.delete("gone").unwrap();
    index.delete("never-existed").unwrap();
    assert_eq!(index.len(), 1);
    assert_eq!(ids(&index.search("ephemeral", 10).unwrap()), ["kept"]);
}

#[test]
fn title_matches_outrank_body_matches() {
    let index = DocIndex::new().unwrap();
    index
        .upsert("body", "unrelated", "tantivy is mentioned here once")
        .unwrap();
    index
        .upsert("title", "tantivy", "something unrelated said here once")
        .unwrap();
    assert_eq!(
        ids(&index.search("tantivy", 10).unwrap()),
        ["title", "body"]
    );
}

#[test]
fn snippet_marks_matched_words_in_the_body() {
    let index = DocIndex::new().unwrap();
    index
        .upsert(
            "s",
            "t",
            "Lists come back in a stable order; generated files are byte-identical <run> to run.",
        )
        .unwrap();
    let hits = index.search("stable", 1).unwrap();
    assert!(
        hits[0].snippet.contains("**stable**"),
        "{}",
        hits[0].snippet
    );
    // Plain text, not HTML: code stays readable.
    assert!(hits[0].snippet.contains("<run>"), "{}", hits[0].snippet);
}

#[test]
fn title_only_match_gets_the_start_of_the_body_as_snippet() {
    let index = DocIndex::new().unwrap();
    index
        .upsert("t", "zeppelin", "Body text without the word.")
        .unwrap();
    let hits = index.search("zeppelin", 1).unwrap();
    assert_eq!(hits[0].snippet, "Body text without the word.");
}

#[test]
fn malformed_queries_are_searched_leniently_not_rejected() {
    let index = DocIndex::new().unwrap();
    index
        .upsert("q", "quotes", "unbalanced quote handling")
        .unwrap();
    for query in [
        "\"unbalanced quote",
        "AND",
        "OR NOT",
        "title:",
        "(((",
        "quote)",
        "[a TO",
        "body:\"",
        "*",
        "~~~ ^^^",
        "unknown_field:quote",
        "\u{0}\u{ffff}",
        "-",
        "+quote -",
    ] {
        let result = index.search(query, 10);
        assert!(result.is_ok(), "query {query:?} failed: {result:?}");
    }
    assert_eq!(ids(&index.search("\"unbalanced quote", 10).unwrap()), ["q"]);
}

#[test]
fn empty_query_and_zero_limit_return_nothing() {
    let index = DocIndex::new().unwrap();
    index.upsert("a", "t", "words").unwrap();
    assert!(index.search("   ", 10).unwrap().is_empty());
    assert!(index.search("words", 0).unwrap().is_empty());
}

#[test]
fn huge_query_and_limit_are_capped() {
    let index = DocIndex::new().unwrap();
    let docs = (0..150).map(|i| (format!("d{i:03}"), "t".into(), "common".into()));
    index.upsert_many(docs).unwrap();
    let hits = index.search("common", 1_000_000).unwrap();
    assert_eq!(hits.len(), MAX_LIMIT);
    let query = "common ".repeat(10_000);
    assert!(index.search(&query, 5).is_ok());
}

#[test]
fn equal_scores_come_back_ordered_by_id_across_segments() {
    let index = DocIndex::new().unwrap();
    // Separate commits put documents in separate segments, in an order unrelated to ids.
    for id in ["m", "c", "x", "a", "q", "b"] {
        index.upsert(id, "same", "identical body").unwrap();
    }
    let hits = index.search("identical", 10).unwrap();
    assert_eq!(ids(&hits), ["a", "b", "c", "m", "q", "x"]);
    // The cut at the limit takes the smallest ids among the tied ones, not arbitrary ones.
    assert_eq!(ids(&index.search("identical", 2).unwrap()), ["a", "b"]);
}

#[test]
fn concurrent_writers_and_readers_do_not_lose_documents() {
    let index = Arc::new(DocIndex::new().unwrap());
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let index = Arc::clone(&index);
            std::thread::spawn(move || {
                for i in 0..10 {
                    index
                        .upsert(&format!("t{t}-{i}"), "t", "shared words")
                        .unwrap();
                    index.search("shared", 5).unwrap();
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    assert_eq!(index.len(), 40);
}

#[test]
fn random_query_syntax_never_errors() {
    let index = DocIndex::new().unwrap();
    index
        .upsert("a", "alpha beta", "gamma delta alpha")
        .unwrap();
    index
        .upsert("b", "beta", "epsilon \"quoted\" text")
        .unwrap();
    const PIECES: &[&str] = &[
        "(", ")", "[", "]", "{", "}", ":", "\"", "'", "*", "~", "^", "+", "-", "!", " ", "AND",
        "OR", "NOT", "TO", "IN", "title", "body", "id", "alpha", "beta", "é", "\\", "/", "<", ">",
        "=", ",", ".", "0", "9", "2.5", "\u{0}", "🙂",
    ];
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    for _ in 0..3_000 {
        let mut query = String::new();
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
        let len = (state >> 59) as usize; // 0..32 pieces
        for _ in 0..len {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
            query.push_str(PIECES[(state >> 33) as usize % PIECES.len()]);
        }
        let result = index.search(&query, 10);
        assert!(result.is_ok(), "query {query:?} failed: {result:?}");
    }
}
