//! `tools/list`: the tools, their schemas and their annotations.

use serde_json::{Value, json};

use crate::Server;

#[tokio::test]
async fn tools_list_names_schemas_and_annotations() {
    let server = Server::start().await;
    let tools = server.client().list_all_tools().await.expect("tools/list");
    let tools: Vec<Value> =
        tools.iter().map(|tool| serde_json::to_value(tool).expect("a tool serializes")).collect();
    let mut names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    names.sort_unstable();
    assert_eq!(names, ["policy_explain", "run", "session_close", "sessions", "terminal"]);

    for tool in &tools {
        let name = &tool["name"];
        assert_eq!(tool["inputSchema"]["type"], "object", "inputSchema of {name}: {tool:#}");
        let takes = if name == "sessions" {
            None
        } else if name == "session_close" {
            Some("session")
        } else {
            Some("command")
        };
        if let Some(argument) = takes {
            assert!(
                tool["inputSchema"]["properties"][argument].is_object(),
                "{name} takes {argument}: {tool:#}"
            );
        }
        assert_eq!(tool["outputSchema"]["type"], "object", "outputSchema of {name}: {tool:#}");
        assert!(tool["outputSchema"]["properties"].is_object(), "outputSchema of {name}");
        assert!(tool["description"].as_str().is_some_and(|d| !d.is_empty()), "{name}");
        let annotations = &tool["annotations"];
        let expected = if name == "policy_explain" || name == "sessions" {
            json!({"readOnlyHint": true})
        } else if name == "session_close" {
            json!({"readOnlyHint": false, "destructiveHint": true, "openWorldHint": false})
        } else {
            json!({"readOnlyHint": false, "destructiveHint": true, "openWorldHint": true})
        };
        for (hint, value) in expected.as_object().unwrap() {
            assert_eq!(&annotations[hint], value, "{hint} of {name}: {annotations:#}");
        }
    }

    let schema = |tool: &str, part: &str| {
        tools.iter().find(|t| t["name"] == tool).unwrap()[part]["properties"].clone()
    };
    for field in ["command", "is_input", "timeout", "reset", "session", "cwd", "background"] {
        assert!(schema("terminal", "inputSchema")[field].is_object(), "terminal takes {field}");
    }
    for field in ["output", "exit_code", "status", "cwd", "duration_ms", "truncated"] {
        assert!(schema("terminal", "outputSchema")[field].is_object(), "terminal gives {field}");
    }
    for field in ["command", "timeout_sec", "cwd", "env", "stdin"] {
        assert!(schema("run", "inputSchema")[field].is_object(), "run takes {field}");
    }
    for field in
        ["status", "stdout", "stderr", "exitCode", "timeoutReason", "terminationMode", "durationMs"]
    {
        assert!(schema("run", "outputSchema")[field].is_object(), "run gives {field}");
    }
}
