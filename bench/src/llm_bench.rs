//! `llm-bench`: what vox's LLM facade adds to a model call, against `scripted-model` on
//! loopback, per API (Chat Completions, Anthropic Messages, Responses); and how long ranking a
//! 500-model registry for a task takes (`vox_suggest_model`'s work).
//!
//! ```text
//! llm-bench [--scripted-model PATH] [--calls N] [--words W] [--models M] [--suggests K]
//! ```
//!
//! Per API, `--calls` (default 200) calls of a one-word answer and of a `--words`-word answer
//! (default 1,000, streamed as that many deltas), each through the facade (streaming parse,
//! accumulation, a callback per delta) and as a bare HTTP request whose whole body is read and
//! dropped (the baseline: the same server, connection handling and bytes). Overhead per call =
//! facade p50 − bare p50 on the one-word answer; per streamed token = (facade p50 − bare p50 on
//! the long answer − the per-call overhead) / words.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;
use vox_llm::{Api, ChatRequest, Endpoint, Facade, FacadeOptions, Message};

struct Opts {
    scripted: PathBuf,
    calls: usize,
    words: usize,
    models: usize,
    suggests: usize,
}

fn opts() -> Result<Opts, String> {
    let here = std::env::current_exe()
        .map_err(|e| e.to_string())?
        .parent()
        .map(PathBuf::from)
        .unwrap_or_default();
    let mut o = Opts {
        scripted: here.join("scripted-model"),
        calls: 200,
        words: 1000,
        models: 500,
        suggests: 2000,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut v = || it.next().ok_or(format!("{a} needs a value"));
        let n = |s: String| s.parse::<usize>().map_err(|e| format!("{s}: {e}"));
        match a.as_str() {
            "--scripted-model" => o.scripted = PathBuf::from(v()?),
            "--calls" => o.calls = n(v()?)?,
            "--words" => o.words = n(v()?)?,
            "--models" => o.models = n(v()?)?,
            "--suggests" => o.suggests = n(v()?)?,
            other => return Err(format!("unknown option {other}")),
        }
    }
    Ok(o)
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    let i = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v[i.clamp(1, v.len()) - 1]
}

fn start(o: &Opts, dir: &std::path::Path) -> Result<scripted_model::process::Running, String> {
    let steps = 4 * o.calls + 10;
    let long: String = (0..o.words).map(|i| format!("w{i} ")).collect();
    let script = json!({"actors": [
        {"name": "short", "match": "SHORT", "steps": (0..steps * 3).map(|_| json!([{"say": "ok"}])).collect::<Vec<_>>()},
        {"name": "long", "match": "LONG", "steps": (0..steps * 3).map(|_| json!([{"say": long.trim_end()}])).collect::<Vec<_>>()},
    ]});
    scripted_model::process::Running::start(&o.scripted, &script, dir)
}

fn path(api: Api) -> &'static str {
    match api {
        Api::Chat => "/chat/completions",
        Api::Responses => "/responses",
        Api::Anthropic => "/messages",
    }
}

async fn measure(
    o: &Opts,
    base: &str,
    api: Api,
    marker: &str,
) -> Result<(Vec<f64>, Vec<f64>), String> {
    let facade = Facade::new(FacadeOptions::default()).map_err(|e| e.to_string())?;
    let ep = Endpoint {
        api,
        base_url: base.to_string(),
        model: "bench".into(),
        api_key: None,
    };
    let req = ChatRequest {
        messages: vec![Message::User {
            content: format!("{marker} go"),
        }],
        ..Default::default()
    };
    let raw: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let body = Bytes::from(
        json!({"model": "bench", "stream": true, "max_tokens": 100,
               "messages": [{"role": "user", "content": format!("{marker} go")}],
               "input": format!("{marker} go")})
        .to_string(),
    );
    let (mut f, mut b) = (Vec::new(), Vec::new());
    for i in 0..o.calls + 5 {
        let t = Instant::now();
        let mut deltas = 0usize;
        facade
            .complete(&ep, &req, |_| deltas += 1, std::future::pending())
            .await
            .map_err(|e| e.to_string())?;
        let facade_us = t.elapsed().as_secs_f64() * 1e6;
        let t = Instant::now();
        let rq = hyper::Request::post(format!("{base}{}", path(api)))
            .header("content-type", "application/json")
            .body(Full::new(body.clone()))
            .map_err(|e| e.to_string())?;
        let resp = raw.request(rq).await.map_err(|e| e.to_string())?;
        let bytes = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        let bare_us = t.elapsed().as_secs_f64() * 1e6;
        if bytes.is_empty() {
            return Err("an empty answer".into());
        }
        // The first few calls warm the connection pools.
        if i >= 5 {
            f.push(facade_us);
            b.push(bare_us);
        }
    }
    Ok((f, b))
}

/// A registry of `n` models over 8 providers, varied in price, context, strengths.
fn big_registry(n: usize) -> vox_llm::Registry {
    let mut t = String::new();
    for p in 0..8 {
        t.push_str(&format!(
            "[providers.p{p}]\napi = \"chat\"\nbase_url = \"http://127.0.0.1:9/v1\"\n\n"
        ));
    }
    let cats = vox_llm::suggest::CATEGORIES;
    for i in 0..n {
        t.push_str(&format!(
            "[models.\"p{}/m{i}\"]\nprovider = \"p{}\"\nname = \"m{i}\"\ncontext_window = {}\ntool_calling = {}\ninput_modalities = {}\nprice_input_per_mtok = {}\nprice_output_per_mtok = {}\nstrengths = [\"{}\", \"{}\"]\n\n",
            i % 8,
            i % 8,
            8000 * (1 + i % 50),
            i % 3 != 0,
            if i % 4 == 0 { "[\"text\", \"image\"]" } else { "[\"text\"]" },
            (i % 17) as f64 * 0.25,
            (i % 13) as f64 * 1.5,
            cats[i % cats.len()],
            cats[(i / 3) % cats.len()],
        ));
    }
    let mut r = vox_llm::Registry::default();
    r.merge(&t, "bench").expect("the bench registry parses");
    r
}

fn main() {
    let o = match opts() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("llm-bench: {e}");
            std::process::exit(2);
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let dir = std::env::temp_dir().join(format!("llm-bench-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let result = rt.block_on(async {
        let model = start(&o, &dir)?;
        let base = model.base_url.clone();
        let mut out: BTreeMap<String, Value> = BTreeMap::new();
        for api in [Api::Chat, Api::Anthropic, Api::Responses] {
            let (mut fs, mut bs) = measure(&o, &base, api, "SHORT").await?;
            let (mut fl, mut bl) = measure(&o, &base, api, "LONG").await?;
            let per_call = pct(&mut fs, 50.0) - pct(&mut bs, 50.0);
            let long_over = pct(&mut fl, 50.0) - pct(&mut bl, 50.0);
            let per_token = (long_over - per_call) / o.words as f64;
            println!(
                "{:<10} one word: facade p50 {:>7.0} µs (p99 {:>7.0}), bare p50 {:>7.0} µs → {:>5.0} µs per call; {} words: facade p50 {:>7.0} µs, bare {:>7.0} µs → {:.2} µs per streamed token",
                api.as_str(),
                pct(&mut fs, 50.0),
                pct(&mut fs, 99.0),
                pct(&mut bs, 50.0),
                per_call,
                o.words,
                pct(&mut fl, 50.0),
                pct(&mut bl, 50.0),
                per_token
            );
            out.insert(api.as_str().into(), json!({"per_call_us": per_call, "per_token_us": per_token}));
        }
        // The facade's own work per streamed token, without a network: the same event stream
        // (a Chat Completions answer of `--words` deltas, one event per chunk) through the SSE
        // parser and the accumulator.
        let events: Vec<Bytes> = (0..o.words)
            .map(|i| Bytes::from(format!("data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"w{i} \"}}}}]}}\n\n")))
            .chain(std::iter::once(Bytes::from_static(b"data: [DONE]\n\n")))
            .collect();
        let mut per_token = Vec::new();
        for _ in 0..50 {
            let chunks = futures_util::stream::iter(events.clone().into_iter().map(Ok::<_, String>));
            let t = Instant::now();
            let mut stream = Box::pin(eventsource_stream::Eventsource::eventsource(chunks));
            let mut acc = vox_llm::wire::Accumulator::default();
            let mut deltas = 0usize;
            while let Some(Ok(e)) = futures_util::StreamExt::next(&mut stream).await {
                if acc.on_event(Api::Chat, &e.event, &e.data).ok().flatten().is_some() {
                    deltas += 1;
                }
            }
            per_token.push(t.elapsed().as_secs_f64() * 1e6 / o.words as f64);
            std::hint::black_box((deltas, acc.text.len()));
        }
        println!(
            "parse + accumulate, in memory: p50 {:.2} µs per streamed token ({} tokens, 50 runs)",
            pct(&mut per_token, 50.0),
            o.words
        );
        let r = big_registry(o.models);
        let mut bench = BTreeMap::new();
        for i in (0..o.models).step_by(5) {
            bench.insert(format!("p{}/m{i}", i % 8), ((i % 10) as f64 / 10.0, 3u32));
        }
        let mut times = Vec::new();
        for k in 0..o.suggests {
            let cat = vox_llm::suggest::CATEGORIES[k % vox_llm::suggest::CATEGORIES.len()];
            let t = Instant::now();
            let s = vox_llm::suggest::rank(cat, r.models.values(), &bench, &|m| m.provider != "p7");
            times.push(t.elapsed().as_secs_f64() * 1e6);
            std::hint::black_box(s);
        }
        println!(
            "suggest over {} models: p50 {:.0} µs, p99 {:.0} µs ({} rankings)",
            o.models,
            pct(&mut times, 50.0),
            pct(&mut times, 99.0),
            o.suggests
        );
        Ok::<_, String>(out)
    });
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(e) = result {
        eprintln!("llm-bench: {e}");
        std::process::exit(1);
    }
}
