//! Client requests in the 2026-07-28 era, which has no server→client requests: a tool that
//! asks (elicitation, sampling) ends its run with an `input_required` result naming what it
//! needs; the client fulfils it and retries the call with `inputResponses` and the echoed
//! `requestState`, and the tool runs again from the start, its earlier asks answered from them.
//!
//! Each ask is keyed by its position in the run and a hash of its request, so a tool that asks
//! something different on a retry is asked anew rather than given an answer to another
//! question. `requestState` holds the answers of earlier rounds: they are the client's own, so
//! it may echo anything it likes; it is size-bounded and must decode.

use rmcp::model::{InputRequest, InputRequests, InputRequiredResult};
use serde_json::{Map, Value};
use std::sync::Mutex;
use vox_core::{Ask, AskReply};

/// Largest `requestState` a retry may echo.
pub const MAX_REQUEST_STATE_BYTES: usize = 1 << 20;
/// Most asks one call may make across its rounds.
pub const MAX_ASKS: usize = 64;

/// One 2026-era call's asks: the answers it has, and what its run asked that has none.
#[derive(Debug)]
pub struct InputRounds {
    elicitation: bool,
    sampling: bool,
    answers: Map<String, Value>,
    state: Mutex<RunState>,
}

#[derive(Debug, Default)]
struct RunState {
    asked: usize,
    missing: InputRequests,
}

impl InputRounds {
    /// From the call's `inputResponses` and `requestState` and the capabilities the request
    /// declares; `Err` names what is wrong with the echoed state.
    pub fn new(
        capabilities: Option<rmcp::model::ClientCapabilities>,
        responses: Option<&rmcp::model::InputResponses>,
        state: Option<&str>,
    ) -> Result<Self, String> {
        let mut answers = match state {
            None => Map::new(),
            Some(s) if s.len() > MAX_REQUEST_STATE_BYTES => {
                return Err(format!(
                    "requestState is {} bytes; at most {MAX_REQUEST_STATE_BYTES} are accepted",
                    s.len()
                ));
            }
            Some(s) => serde_json::from_str(s)
                .map_err(|e| format!("requestState is not what this server sent: {e}"))?,
        };
        for (k, v) in responses.into_iter().flatten() {
            answers.insert(k.clone(), v.clone());
        }
        if answers.len() > MAX_ASKS {
            return Err(format!("a call answers at most {MAX_ASKS} requests"));
        }
        let caps = capabilities.unwrap_or_default();
        Ok(InputRounds {
            elicitation: caps.elicitation.is_some(),
            sampling: caps.sampling.is_some(),
            answers,
            state: Mutex::default(),
        })
    }

    /// The next ask of the run: its answer when the client gave one, else it is recorded as
    /// missing and the run fails (it goes on after the client answers and retries).
    pub fn ask(&self, ask: Ask, params: Value) -> Result<AskReply, String> {
        let declared = match ask {
            Ask::Elicit => self.elicitation,
            Ask::Sample => self.sampling,
        };
        if !declared {
            return Err(format!(
                "the client did not declare the `{}` capability",
                ask.capability()
            ));
        }
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let n = st.asked;
        st.asked += 1;
        if n >= MAX_ASKS {
            return Err(format!("a call asks its client at most {MAX_ASKS} times"));
        }
        let key = format!("vox-{n}-{:016x}", digest(&params));
        if let Some(answer) = self.answers.get(&key) {
            let (tx, rx) = tokio::sync::oneshot::channel();
            let _ = tx.send(Ok(answer.clone()));
            return Ok(rx);
        }
        let invalid =
            |e: serde_json::Error| format!("the {} request is invalid: {e}", ask.capability());
        let request = match ask {
            Ask::Elicit => InputRequest::Elicitation(rmcp::model::Request::new(
                serde_json::from_value(params).map_err(invalid)?,
            )),
            Ask::Sample => InputRequest::CreateMessage(rmcp::model::Request::new(
                serde_json::from_value(params).map_err(invalid)?,
            )),
        };
        st.missing.insert(key, request);
        Err(format!(
            "the client is asked for input ({}); the call continues when it retries with the answer",
            ask.capability()
        ))
    }

    /// What the run asked that had no answer, as the call's result: `None` when it asked
    /// nothing new (its own outcome stands).
    pub fn input_required(&self) -> Option<InputRequiredResult> {
        let missing =
            std::mem::take(&mut self.state.lock().unwrap_or_else(|p| p.into_inner()).missing);
        if missing.is_empty() {
            return None;
        }
        let state = serde_json::to_string(&self.answers).unwrap_or_else(|_| "{}".into());
        Some(InputRequiredResult::new(Some(missing), Some(state)))
    }
}

/// A hash of a request, stable within this build (it only has to match across the rounds of
/// one call).
fn digest(params: &Value) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    params.to_string().hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn caps() -> Option<rmcp::model::ClientCapabilities> {
        serde_json::from_value(json!({"elicitation": {}, "sampling": {}})).ok()
    }

    fn form(q: &str) -> Value {
        json!({"message": q, "requestedSchema": {"type": "object", "properties": {"a": {"type": "string"}}}})
    }

    #[test]
    fn a_run_asks_then_a_retry_is_answered_and_asks_the_next() {
        let first = InputRounds::new(caps(), None, None).unwrap();
        let e = first.ask(Ask::Elicit, form("one?")).unwrap_err();
        assert!(e.contains("asked for input"), "{e}");
        let r = first.input_required().expect("input is required");
        let requests = r.input_requests.unwrap();
        assert_eq!(requests.len(), 1);
        let key = requests.keys().next().unwrap().clone();
        assert!(key.starts_with("vox-0-"), "{key}");
        let state = r.request_state.unwrap();

        let answers = [(
            key.clone(),
            json!({"action": "accept", "content": {"a": "x"}}),
        )]
        .into_iter()
        .collect();
        let second = InputRounds::new(caps(), Some(&answers), Some(&state)).unwrap();
        let mut reply = second.ask(Ask::Elicit, form("one?")).unwrap();
        assert_eq!(reply.try_recv().unwrap().unwrap()["content"]["a"], "x");
        assert!(second.ask(Ask::Elicit, form("two?")).is_err());
        let r = second.input_required().unwrap();
        let next = r.input_requests.unwrap();
        assert!(next.keys().all(|k| k.starts_with("vox-1-")), "{next:?}");
        // The earlier answer travels in the state.
        let state: Map<String, Value> = serde_json::from_str(&r.request_state.unwrap()).unwrap();
        assert!(state.contains_key(&key));
        // A run that asks nothing new keeps its own outcome.
        let third = InputRounds::new(caps(), None, None).unwrap();
        assert!(third.input_required().is_none());
    }

    #[test]
    fn a_changed_question_is_asked_anew_and_bad_state_is_refused() {
        let first = InputRounds::new(caps(), None, None).unwrap();
        let _ = first.ask(Ask::Elicit, form("one?"));
        let key = first
            .input_required()
            .unwrap()
            .input_requests
            .unwrap()
            .into_keys()
            .next()
            .unwrap();
        let answers = [(key, json!({"action": "decline"}))].into_iter().collect();
        let retry = InputRounds::new(caps(), Some(&answers), None).unwrap();
        assert!(retry.ask(Ask::Elicit, form("another question?")).is_err());
        assert!(retry.input_required().is_some());

        assert!(
            InputRounds::new(caps(), None, Some("not json"))
                .unwrap_err()
                .contains("requestState")
        );
        let big = "x".repeat(MAX_REQUEST_STATE_BYTES + 1);
        assert!(
            InputRounds::new(caps(), None, Some(&big))
                .unwrap_err()
                .contains("at most")
        );
        let none = InputRounds::new(None, None, None).unwrap();
        assert!(
            none.ask(Ask::Sample, json!({}))
                .unwrap_err()
                .contains("`sampling` capability")
        );
    }
}
