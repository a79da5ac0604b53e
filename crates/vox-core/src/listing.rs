//! What a [`CallScope`] sees: its tools (exactly those [`Orchestrator::call`] would run for
//! it), and the resources, templates and prompts of the tool providers it reaches. One
//! function per list, each taking the scope; no transport filters on its own.

use crate::call::{CallScope, SessionEffect, WorkspaceTools};
use crate::error::ToolError;
use crate::orchestrator::Orchestrator;
use serde_json::Value;
use std::sync::Arc;
use vox_mcp_registry::{Caller, authorize_tool};

impl Orchestrator {
    /// The tools `scope` may call, as MCP tool descriptors in name order (catalog tools), then
    /// the workspace's and skills' as its [`WorkspaceTools`] says. An agent's are its own
    /// public tools within the scope's surface; a retired agent's, none.
    pub fn list(&self, scope: &CallScope) -> Vec<Value> {
        if let Some(id) = scope.agent.as_deref() {
            let agent = self
                .ctx
                .hooks()
                .agents
                .as_ref()
                .and_then(|d| d.current(id).ok().flatten());
            let Some(agent) = agent else {
                return vec![];
            };
            let surface = self.agent_surface(&scope.surface, &agent);
            let mut tools = encode(self.catalog_tools(&surface, scope.caller));
            tools.extend(self.upstream_tools(&surface, scope.caller));
            return tools;
        }
        let mut tools = if scope.surface == self.ctx.profile && scope.caller == Caller::LOCAL {
            self.local_tools.as_ref().clone()
        } else {
            encode(self.catalog_tools(&scope.surface, scope.caller))
        };
        tools.extend(self.upstream_tools(&scope.surface, scope.caller));
        if scope.workspace_tools != WorkspaceTools::Off {
            tools.extend(self.dynamic_tools(scope.workspace_tools == WorkspaceTools::Listed));
        }
        tools
    }

    /// The upstream servers' tools `surface` serves `caller`: exactly those
    /// `authorize_upstream` allows, as `Orchestrator::call` decides them.
    fn upstream_tools(&self, surface: &vox_mcp_registry::ProfileSet, caller: Caller) -> Vec<Value> {
        let Some(upstream) = &self.ctx.hooks().upstream else {
            return Vec::new();
        };
        if surface.upstream().is_none() {
            return Vec::new();
        }
        let booted = self.ctx.boot.booted_mask;
        upstream
            .tools()
            .iter()
            .filter(|t| {
                vox_mcp_registry::authorize_upstream(surface, &t.name, t.class, caller, booted)
                    .is_ok()
            })
            .map(|t| t.descriptor.clone())
            .collect()
    }

    /// The tools beyond the static catalog (under `dev`: workspace tools when `workspace`,
    /// then skill macro tools). Providers are asked in order; a name an earlier provider
    /// serves is not listed again (that provider is the one called).
    fn dynamic_tools(&self, workspace: bool) -> Vec<Value> {
        let providers = &self.ctx.hooks().dynamic;
        // A name an upstream server serves is that server's (`Orchestrator::call` decides it as
        // the server's tool): a workspace tool of the same name is shadowed, as `vox_*` ones are.
        let served = self.ctx.hooks().upstream.as_ref().map(|u| u.tools());
        let shadowed = |n: &str| {
            served
                .as_ref()
                .is_some_and(|t| t.binary_search_by(|u| u.name.as_str().cmp(n)).is_ok())
        };
        let mut tools = Vec::new();
        for (i, p) in providers.iter().enumerate() {
            tools.extend(p.descriptors(workspace).into_iter().filter(|d| {
                d["name"]
                    .as_str()
                    .is_some_and(|n| !shadowed(n) && !providers[..i].iter().any(|q| q.has_tool(n)))
            }));
        }
        tools
    }

    /// Whether `scope` reaches only `skill://` resources: it reaches no workspace tool, but
    /// may list skills (an operator on a gateway without the workspace opt-in).
    fn skill_resources_only(&self, scope: &CallScope) -> Option<bool> {
        if scope.workspace_tools != WorkspaceTools::Off {
            return Some(false);
        }
        let may_list_skills = scope.agent.is_none()
            && authorize_tool(
                &scope.surface,
                "vox_skill_list",
                scope.caller,
                self.ctx.boot.booted_mask,
            )
            .is_ok();
        may_list_skills.then_some(true)
    }

    /// The resources `scope` may read: every provider's (workspace resources, then
    /// `skill://`) when it reaches workspace tools, else `skill://` ones when it may list
    /// skills, else none.
    pub fn resources(&self, scope: &CallScope) -> Vec<Value> {
        let mut upstream = self.upstream_reached(scope, |u| u.resources());
        let Some(skills_only) = self.skill_resources_only(scope) else {
            return upstream;
        };
        let mut all: Vec<Value> = self
            .ctx
            .hooks()
            .dynamic
            .iter()
            .flat_map(|p| p.resources())
            .collect();
        if skills_only {
            all.retain(|r| r["uri"].as_str().is_some_and(is_skill_uri));
        }
        all.append(&mut upstream);
        all
    }

    /// What `list` gives of the upstream servers whose resources and prompts `scope` reaches
    /// (`authorize_upstream_server`; an agent reaches none: they are a person's).
    fn upstream_reached(
        &self,
        scope: &CallScope,
        list: impl Fn(&dyn crate::UpstreamTools) -> Vec<(String, Value)>,
    ) -> Vec<Value> {
        let Some(upstream) = &self.ctx.hooks().upstream else {
            return Vec::new();
        };
        if scope.agent.is_some() || scope.surface.upstream().is_none() {
            return Vec::new();
        }
        let booted = self.ctx.boot.booted_mask;
        list(upstream.as_ref())
            .into_iter()
            .filter(|(server, _)| {
                vox_mcp_registry::authorize_upstream_server(
                    &scope.surface,
                    server,
                    scope.caller,
                    booted,
                )
                .is_ok()
            })
            .map(|(_, v)| v)
            .collect()
    }

    /// The upstream hook, when `scope` reaches the server `uri_or_name` belongs to.
    fn upstream_for(
        &self,
        scope: &CallScope,
        uri_or_name: &str,
    ) -> Option<&Arc<dyn crate::UpstreamTools>> {
        let upstream = self.ctx.hooks().upstream.as_ref()?;
        let server = upstream.server_of(uri_or_name)?;
        let ok = scope.agent.is_none()
            && vox_mcp_registry::authorize_upstream_server(
                &scope.surface,
                &server,
                scope.caller,
                self.ctx.boot.booted_mask,
            )
            .is_ok();
        ok.then_some(upstream)
    }

    /// Reads a resource `scope` may read, from the first provider that has it (blocking).
    pub fn read_resource(
        &self,
        scope: &CallScope,
        uri: &str,
    ) -> Result<crate::ResourceBody, ToolError> {
        let missing = || ToolError::not_found(format!("no resource {uri}"));
        if let Some(upstream) = self.upstream_for(scope, uri) {
            return tokio::runtime::Handle::current().block_on(upstream.read(uri));
        }
        match self.skill_resources_only(scope) {
            None => return Err(missing()),
            Some(true) if !is_skill_uri(uri) => return Err(missing()),
            Some(_) => {}
        }
        self.ctx
            .hooks()
            .dynamic
            .iter()
            .find_map(|p| p.read(uri))
            .unwrap_or_else(|| Err(missing()))
    }

    /// The resource templates `scope` reaches (the workspace's).
    pub fn resource_templates(&self, scope: &CallScope) -> Vec<Value> {
        if scope.workspace_tools == WorkspaceTools::Off {
            return vec![];
        }
        self.ctx
            .hooks()
            .dynamic
            .iter()
            .flat_map(|p| p.resource_templates())
            .collect()
    }

    /// Completes an argument of a prompt (`prompt`) or resource template (blocking).
    pub fn complete(
        &self,
        scope: &CallScope,
        prompt: bool,
        name: &str,
        argument: &str,
        value: &str,
    ) -> Result<Value, ToolError> {
        let what = if prompt {
            "prompt"
        } else {
            "resource template"
        };
        self.first_provider(scope, &format!("no {what} {name}"), |p| {
            p.complete(prompt, name, argument, value)
        })
    }

    /// The answer of the first workspace provider that has one, when `scope` reaches them;
    /// else `not_found` saying `missing`.
    fn first_provider(
        &self,
        scope: &CallScope,
        missing: &str,
        ask: impl FnMut(&Arc<dyn crate::DynamicTools>) -> Option<Result<Value, ToolError>>,
    ) -> Result<Value, ToolError> {
        if scope.workspace_tools == WorkspaceTools::Off {
            return Err(ToolError::not_found(missing));
        }
        self.ctx
            .hooks()
            .dynamic
            .iter()
            .find_map(ask)
            .unwrap_or_else(|| Err(ToolError::not_found(missing)))
    }

    /// The prompts `scope` reaches (workspace `@mcp.prompt` functions, skills), in name order.
    pub fn prompts(&self, scope: &CallScope) -> Vec<Value> {
        let upstream = self.upstream_reached(scope, |u| u.prompts());
        if scope.workspace_tools == WorkspaceTools::Off {
            return upstream;
        }
        // A name two providers have is the first one's, as `get_prompt` answers it.
        let mut seen = std::collections::HashSet::new();
        let mut all: Vec<Value> = self
            .ctx
            .hooks()
            .dynamic
            .iter()
            .flat_map(|p| p.prompts())
            .filter(|p| seen.insert(p["name"].as_str().unwrap_or_default().to_owned()))
            .collect();
        all.extend(upstream);
        all.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
        all
    }

    /// Gets a prompt `scope` reaches, from the first provider that has it (blocking).
    pub fn get_prompt(
        &self,
        scope: &CallScope,
        name: &str,
        args: &Value,
    ) -> Result<Value, ToolError> {
        if let Some(upstream) = self.upstream_for(scope, name) {
            return tokio::runtime::Handle::current()
                .block_on(upstream.get_prompt(name, args.clone()));
        }
        self.first_provider(scope, &format!("no prompt {name}"), |p| {
            p.get_prompt(name, args)
        })
    }

    /// Sets again what `scope`'s session had chosen before its daemon restarted (the
    /// [`SessionEffect`] its calls reported); `Err` names what could not be restored.
    pub fn restore_session(
        &self,
        scope: &CallScope,
        effect: &SessionEffect,
    ) -> Result<(), ToolError> {
        for g in &self.ctx.hooks().guards {
            g.restore(scope, effect)?;
        }
        Ok(())
    }
}

fn is_skill_uri(uri: &str) -> bool {
    uri.starts_with("skill://")
}

fn encode(tools: Vec<&crate::ToolDescriptor>) -> Vec<Value> {
    tools
        .into_iter()
        .filter_map(|d| serde_json::to_value(d).ok())
        .collect()
}
