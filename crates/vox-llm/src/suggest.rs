//! Choosing a model for a task category: what the category needs rules models out, then each
//! remaining model is scored from recorded benchmarks, its known strengths, its price and its
//! context window, and the score is explained part by part.

use crate::ModelSpec;
use serde::Serialize;
use std::collections::BTreeMap;

/// The task categories a suggestion understands.
pub const CATEGORIES: &[&str] = &[
    "codegen",
    "review",
    "testing",
    "planning",
    "chat",
    "research",
    "summarize",
    "vision",
];

/// What a category needs of a model.
fn needs(category: &str) -> (bool, Option<&'static str>) {
    // (tool calling, an input modality)
    match category {
        "codegen" | "testing" | "planning" | "research" => (true, None),
        "vision" => (false, Some("image")),
        _ => (false, None),
    }
}

/// One model's score and why.
#[derive(Debug, Clone, Serialize)]
pub struct Scored {
    /// The model's registry id.
    pub model_id: String,
    /// 0 to 1.
    pub score: f64,
    /// Each part's contribution (already weighted), summing to `score`.
    pub parts: BTreeMap<&'static str, f64>,
    /// Whether the model can be called now (its provider's key is set, or it needs none).
    pub has_credentials: bool,
    /// The score's reasons, for people (benchmarks, strengths, price, context).
    pub why: String,
}

/// A model left out, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Excluded {
    /// The model's registry id.
    pub model_id: String,
    /// Why it cannot serve the category (no tool calling, a missing input modality).
    pub why: String,
}

/// The ranking for one category.
#[derive(Debug, Clone, Serialize)]
pub struct Suggestion {
    /// The task category ranked for (`codegen`, `review`, `vision`, ...).
    pub category: String,
    /// Best first; models with credentials before those without.
    pub ranked: Vec<Scored>,
    /// Models that cannot serve the category at all, and why.
    pub excluded: Vec<Excluded>,
}

/// Ranks `models` for `category`. `benchmarks` maps a model id to its mean recorded score (0 to
/// 1) and sample count for this category; `credentials` says whether a model can be called now.
pub fn rank<'a>(
    category: &str,
    models: impl Iterator<Item = &'a ModelSpec>,
    benchmarks: &BTreeMap<String, (f64, u32)>,
    credentials: &dyn Fn(&ModelSpec) -> bool,
) -> Suggestion {
    let (tools, modality) = needs(category);
    let models: Vec<&ModelSpec> = models.collect();
    let mut excluded = Vec::new();
    let fit: Vec<&ModelSpec> = models
        .into_iter()
        .filter(|m| {
            if tools && !m.tool_calling {
                excluded.push(Excluded {
                    model_id: m.id.clone(),
                    why: format!("{category} needs tool calling, which it lacks"),
                });
                return false;
            }
            if let Some(x) = modality
                && !m.input_modalities.iter().any(|i| i == x)
            {
                excluded.push(Excluded {
                    model_id: m.id.clone(),
                    why: format!("{category} needs {x} input"),
                });
                return false;
            }
            true
        })
        .collect();
    // Price and context are scored relative to the candidates, on a log scale.
    let price = |m: &ModelSpec| m.price_input_per_mtok + 4.0 * m.price_output_per_mtok;
    let (pmin, pmax) = bounds(fit.iter().map(|m| (1.0 + price(m)).ln()));
    let (cmin, cmax) = bounds(fit.iter().map(|m| (m.context_window as f64).ln()));
    let mut ranked: Vec<Scored> = fit
        .into_iter()
        .map(|m| {
            let cheap = 1.0 - unit((1.0 + price(m)).ln(), pmin, pmax);
            let context = unit((m.context_window as f64).ln(), cmin, cmax);
            let strength = if m.strengths.iter().any(|s| s == category) {
                1.0
            } else {
                0.0
            };
            let bench = benchmarks.get(&m.id).copied();
            let mut parts = BTreeMap::new();
            match bench {
                // Measured results outweigh the prior.
                Some((mean, _)) => {
                    parts.insert("benchmarks", 0.5 * mean.clamp(0.0, 1.0));
                    parts.insert("strengths", 0.2 * strength);
                    parts.insert("cost", 0.2 * cheap);
                    parts.insert("context", 0.1 * context);
                }
                None => {
                    parts.insert("strengths", 0.5 * strength);
                    parts.insert("cost", 0.3 * cheap);
                    parts.insert("context", 0.2 * context);
                }
            }
            let score = parts.values().sum::<f64>();
            let mut why = Vec::new();
            match bench {
                Some((mean, n)) => why.push(format!(
                    "mean {category} benchmark {mean:.2} over {n} run(s)"
                )),
                None => why.push(format!("no {category} benchmark recorded")),
            }
            why.push(if strength > 0.0 {
                format!("listed as strong at {category}")
            } else {
                format!("not listed as strong at {category}")
            });
            why.push(format!(
                "${:.2}/${:.2} per million input/output tokens",
                m.price_input_per_mtok, m.price_output_per_mtok
            ));
            why.push(format!("{} tokens of context", m.context_window));
            let has = credentials(m);
            if !has {
                why.push("no credentials set for its provider".into());
            }
            Scored {
                model_id: m.id.clone(),
                score: (score * 1000.0).round() / 1000.0,
                parts,
                has_credentials: has,
                why: why.join("; "),
            }
        })
        .collect();
    ranked.sort_by(|a, b| {
        b.has_credentials
            .cmp(&a.has_credentials)
            .then(b.score.total_cmp(&a.score))
            .then(a.model_id.cmp(&b.model_id))
    });
    Suggestion {
        category: category.to_string(),
        ranked,
        excluded,
    }
}

fn bounds(v: impl Iterator<Item = f64>) -> (f64, f64) {
    v.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
        (lo.min(x), hi.max(x))
    })
}

/// `x` within `[lo, hi]` as 0 to 1 (1 when every candidate is the same).
fn unit(x: f64, lo: f64, hi: f64) -> f64 {
    if hi - lo < 1e-12 {
        1.0
    } else {
        ((x - lo) / (hi - lo)).clamp(0.0, 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Registry;

    #[test]
    fn needs_rule_out_benchmarks_lead_and_the_score_is_explained() {
        let r = Registry::load(&|_: &str| None).unwrap();
        let none = BTreeMap::new();
        let all = |_: &ModelSpec| true;
        let s = rank("vision", r.models.values(), &none, &all);
        assert!(
            s.excluded
                .iter()
                .any(|e| e.model_id == "ollama/llama3.1" && e.why.contains("image"))
        );
        assert!(s.ranked.iter().all(|m| m.model_id != "ollama/llama3.1"));
        // A benchmark moves a model to the top.
        let mut bench = BTreeMap::new();
        bench.insert("ollama/llama3.1".to_string(), (1.0, 3));
        let s = rank("chat", r.models.values(), &bench, &all);
        assert_eq!(s.ranked[0].model_id, "ollama/llama3.1", "{s:#?}");
        assert!(s.ranked[0].why.contains("over 3 run(s)"));
        let sum: f64 = s.ranked[0].parts.values().sum();
        assert!((sum - s.ranked[0].score).abs() < 0.001);
        // Without credentials a model ranks after those that can be called.
        let only_local = |m: &ModelSpec| m.provider == "ollama";
        let s = rank("summarize", r.models.values(), &none, &only_local);
        assert_eq!(s.ranked[0].model_id, "ollama/llama3.1");
        assert!(!s.ranked[1].has_credentials);
    }
}
