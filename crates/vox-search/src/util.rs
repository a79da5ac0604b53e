//! Helpers shared by the two indexes: input caps, identifier splitting, deterministic top-k.

use tantivy::collector::TopDocs;
use tantivy::query::{EmptyQuery, EnableScoring, Query, QueryParser};
use tantivy::{DocAddress, Score, Searcher};

use crate::Result;

/// Longest query text considered; the rest is ignored so a pasted file cannot make a huge query.
pub const MAX_QUERY_CHARS: usize = 1_000;
/// Most hits a single search returns, whatever limit the caller asked for.
pub const MAX_LIMIT: usize = 100;
/// Upper bound on candidates fetched while widening the top-k to include every tied score.
const MAX_TIE_CANDIDATES: usize = 10_000;

/// Trims the query and cuts it at [`MAX_QUERY_CHARS`] characters (on a char boundary).
pub fn cap_query(query: &str) -> &str {
    let query = query.trim();
    match query.char_indices().nth(MAX_QUERY_CHARS) {
        Some((byte, _)) => &query[..byte],
        None => query,
    }
}

/// Clamps a caller's limit to [`MAX_LIMIT`].
pub fn clamp_limit(limit: usize) -> usize {
    limit.min(MAX_LIMIT)
}

/// Cuts `text` to at most `max_chars` characters, marking the cut with an ellipsis.
pub fn truncate_chars(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((byte, _)) => {
            let mut cut = text[..byte].to_string();
            cut.push('…');
            cut
        }
        None => text.to_string(),
    }
}

/// Splits an identifier into lowercase words on `_`, `-`, `.`, digits/letter changes and camelCase
/// boundaries: `parseHTTPRequest_v2` → `parse http request v 2`.
pub fn split_identifier(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    for chunk in name.split(|c: char| !c.is_alphanumeric()) {
        let chars: Vec<char> = chunk.chars().collect();
        let mut current = String::new();
        for (i, &c) in chars.iter().enumerate() {
            let boundary = match i.checked_sub(1).and_then(|p| chars.get(p)) {
                None => false,
                Some(&prev) => {
                    let next_is_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
                    (prev.is_lowercase() && c.is_uppercase())
                        // The last capital of an acronym starts the next word: HTTPRequest.
                        || (prev.is_uppercase() && c.is_uppercase() && next_is_lower)
                        || (prev.is_alphabetic() && c.is_numeric())
                        || (prev.is_numeric() && c.is_alphabetic())
                }
            };
            if boundary && !current.is_empty() {
                words.push(std::mem::take(&mut current).to_lowercase());
            }
            current.push(c);
        }
        if !current.is_empty() {
            words.push(current.to_lowercase());
        }
    }
    words
}

/// The lowercase words of a free-text query, without the boolean operators of the query syntax,
/// deduplicated in first-seen order. Used to find matching lines and declaration names.
pub fn query_words(query: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    for raw in query.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
        if raw.is_empty() || matches!(raw, "AND" | "OR" | "NOT" | "IN") {
            continue;
        }
        let word = raw.to_lowercase();
        if !words.contains(&word) {
            words.push(word);
        }
    }
    words
}

/// Parses user query text without ever failing: syntax errors are dropped by tantivy's lenient
/// parser, and if what it kept still cannot run (an exists query `field:*` on a field that is
/// unknown or not a fast field only fails when its weight is built) the query falls back to its
/// plain words, which always parse to term and phrase queries.
pub fn lenient_query(parser: &QueryParser, searcher: &Searcher, text: &str) -> Box<dyn Query> {
    let runnable = |query: &dyn Query| {
        query
            .weight(EnableScoring::disabled_from_searcher(searcher))
            .is_ok()
    };
    let (parsed, _syntax_errors) = parser.parse_query_lenient(text);
    if runnable(&*parsed) {
        return parsed;
    }
    let (plain, _syntax_errors) = parser.parse_query_lenient(&query_words(text).join(" "));
    if runnable(&*plain) {
        plain
    } else {
        Box::new(EmptyQuery)
    }
}

/// Runs `query` and returns the best `limit` hits ordered by score descending, then by the key
/// `key_of` gives each document ascending, so equal scores come back in the same order whatever
/// the segment layout. The top-k is widened until no document tied with the last kept one is
/// left out (bounded by an internal cap).
pub fn stable_top_docs<K: Ord>(
    searcher: &Searcher,
    query: &dyn Query,
    limit: usize,
    mut key_of: impl FnMut(DocAddress) -> Result<K>,
) -> Result<Vec<(Score, K, DocAddress)>> {
    if limit == 0 {
        return Ok(Vec::new());
    }
    let mut fetch = limit;
    let hits = loop {
        let hits = searcher.search(query, &TopDocs::with_limit(fetch).order_by_score())?;
        let (Some(kept), Some(last)) = (hits.get(limit - 1), hits.last()) else {
            break hits; // fewer hits than the limit: nothing can be missing
        };
        if hits.len() < fetch || last.0 < kept.0 || fetch >= MAX_TIE_CANDIDATES {
            break hits;
        }
        fetch = (fetch * 2).min(MAX_TIE_CANDIDATES);
    };
    let threshold = hits.get(limit - 1).map(|h| h.0);
    let mut keyed = Vec::with_capacity(hits.len());
    for (score, address) in hits {
        if threshold.is_some_and(|t| score < t) {
            break; // below the limit-th score: cannot make the cut
        }
        keyed.push((score, key_of(address)?, address));
    }
    keyed.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    keyed.truncate(limit);
    Ok(keyed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_identifier_splits_snake_camel_acronyms_and_digits() {
        assert_eq!(
            split_identifier("parseHTTPRequest_v2"),
            ["parse", "http", "request", "v", "2"]
        );
        assert_eq!(
            split_identifier("snake_case_name"),
            ["snake", "case", "name"]
        );
        assert_eq!(split_identifier("CamelCase"), ["camel", "case"]);
        assert_eq!(split_identifier("__"), Vec::<String>::new());
    }

    #[test]
    fn cap_query_cuts_on_char_boundary() {
        let long = "é".repeat(MAX_QUERY_CHARS + 10);
        assert_eq!(cap_query(&long).chars().count(), MAX_QUERY_CHARS);
    }

    #[test]
    fn truncate_chars_marks_the_cut() {
        assert_eq!(truncate_chars("abcdef", 3), "abc…");
        assert_eq!(truncate_chars("abc", 3), "abc");
    }

    #[test]
    fn query_words_drop_operators_and_duplicates() {
        assert_eq!(
            query_words("Foo AND bar OR foo \"baz"),
            ["foo", "bar", "baz"]
        );
    }
}
