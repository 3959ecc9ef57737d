#!/usr/bin/env python3
"""What agents and apps send, as their own libraries send it: tool calls and
structured output through the official `openai` client (the tool-call loop,
streamed tool calls, `beta.chat.completions.parse` with a pydantic model),
langchain-openai (`bind_tools`, `with_structured_output`) and pydantic-ai (an
agent whose output is a pydantic model), against a running main node.

    python3 tests/clients/agent_clients.py http://127.0.0.1:8080/v1

The model is the tiny random one: what it says means nothing, so the checks
are on the shapes (a tool call the client library accepts, JSON its pydantic
model validates), which the server guarantees by constrained decoding.

Exit 0: every check passed; 1: a check failed (the message says which);
77: the client packages are not installed (scripts/client_venv.sh installs
them). Run by tests/cluster/openai_clients_test.cpp against the process
testbed.
"""
import json
import sys

from client_checks import check, skip

try:
    import openai
    from langchain_core.messages import HumanMessage
    from langchain_openai import ChatOpenAI
    from pydantic import BaseModel, Field
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider
except ImportError as e:  # not installed: skip
    skip(e)


class Weather(BaseModel):
    """A weather report (the structured output every library asks for)."""
    city: str = Field(max_length=16)
    celsius: int = Field(ge=-60, le=60)
    sunny: bool


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 16},
                           "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
    },
}
TIME_TOOL = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "The time in a time zone.",
        "parameters": {"type": "object", "properties": {"zone": {"type": "string", "maxLength": 12}},
                       "required": ["zone"], "additionalProperties": False},
    },
}
LIMIT = 400  # tokens: room for any object the schemas above allow, whitespace included
# The tiny random model, free to make more calls, may make them until the
# token limit: one call per reply (parallel_tool_calls false) keeps the
# replies finished. Named choices are one call anyway.


def choice_text(reply):
    return reply.choices[0].message.content


def openai_tool_loop(client, model):
    messages = [{"role": "user", "content": "What is the weather in Paris?"}]
    first = client.chat.completions.create(model=model, messages=messages,
                                           tools=[WEATHER_TOOL, TIME_TOOL], tool_choice="required",
                                           parallel_tool_calls=False,
                                           max_completion_tokens=LIMIT, temperature=0)
    check(choice_text(first) is None, "a reply that only calls tools has no content")
    choice = first.choices[0]
    check(choice.finish_reason == "tool_calls",
          f"finish_reason tool_calls, got {choice.finish_reason}: {choice.message}")
    calls = choice.message.tool_calls or []
    check(len(calls) >= 1, "tool_choice required gives a tool call")
    for call in calls:
        check(call.type == "function" and call.id, "each call has an id and type function")
        check(call.function.name in ("get_weather", "get_time"), f"a known tool: {call.function.name}")
        args = json.loads(call.function.arguments)
        check(isinstance(args, dict), "arguments are a JSON object")
        if call.function.name == "get_weather":
            check(set(args) == {"city", "unit"} and args["unit"] in ("celsius", "fahrenheit"),
                  f"arguments follow the tool's schema: {args}")

    # The answer goes back as a tool message; the model then replies in text.
    messages.append(choice.message.model_dump(exclude_none=True))
    for call in calls:
        messages.append({"role": "tool", "tool_call_id": call.id, "content": "Sunny, 21 C."})
    second = client.chat.completions.create(model=model, messages=messages,
                                            tools=[WEATHER_TOOL, TIME_TOOL], tool_choice="none",
                                            max_completion_tokens=8, temperature=0)
    check(not second.choices[0].message.tool_calls, "tool_choice none: no tool call")
    check(second.choices[0].finish_reason in ("stop", "length"), "a text reply")

    # A named function, streamed: the deltas add up to the non-streamed call.
    named = {"type": "function", "function": {"name": "get_time"}}
    whole = client.chat.completions.create(model=model, messages=messages[:1],
                                           tools=[WEATHER_TOOL, TIME_TOOL], tool_choice=named,
                                           max_completion_tokens=LIMIT, temperature=0)
    wcalls = whole.choices[0].message.tool_calls
    check(wcalls and all(c.function.name == "get_time" for c in wcalls), "the named tool is called")
    names, arguments, finish = {}, {}, None
    for chunk in client.chat.completions.create(model=model, messages=messages[:1],
                                                tools=[WEATHER_TOOL, TIME_TOOL], tool_choice=named,
                                                max_completion_tokens=LIMIT, temperature=0,
                                                stream=True):
        if not chunk.choices:
            continue
        for d in chunk.choices[0].delta.tool_calls or []:
            if d.function and d.function.name:
                names[d.index] = d.function.name
            if d.function and d.function.arguments:
                arguments[d.index] = arguments.get(d.index, "") + d.function.arguments
        finish = chunk.choices[0].finish_reason or finish
    check(finish == "tool_calls", f"streamed finish_reason tool_calls, got {finish}")
    check([names[i] for i in sorted(names)] == [c.function.name for c in wcalls],
          "streamed names equal the non-streamed ones")
    check([arguments.get(i, "") for i in sorted(names)] == [c.function.arguments for c in wcalls],
          "streamed argument fragments add up to the non-streamed arguments")


def openai_structured(client, model):
    parse = getattr(getattr(client, "beta", None), "chat", client.chat).completions.parse
    parsed = parse(
        model=model, messages=[{"role": "user", "content": "Weather in Oslo as JSON."}],
        response_format=Weather, max_completion_tokens=LIMIT, temperature=0)
    check(isinstance(parsed.choices[0].message.parsed, Weather),
          f"parse returns a Weather: {parsed.choices[0].message.content!r}")
    obj = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "Any JSON object."}],
        response_format={"type": "json_object"}, max_completion_tokens=LIMIT, temperature=0.8,
        seed=7)
    if obj.choices[0].finish_reason == "stop":
        check(isinstance(json.loads(obj.choices[0].message.content), dict),
              "json_object gives a JSON object")


def langchain_checks(base_url, model):
    llm = ChatOpenAI(base_url=base_url, api_key="unused", model=model, temperature=0,
                     max_completion_tokens=LIMIT)
    tooled = llm.bind_tools([WEATHER_TOOL], tool_choice="get_weather")
    reply = tooled.invoke([HumanMessage("Weather in Rome?")])
    check(len(reply.tool_calls) >= 1 and reply.tool_calls[0]["name"] == "get_weather",
          f"langchain bind_tools: a get_weather call, got {reply.tool_calls}")
    check(isinstance(reply.tool_calls[0]["args"], dict), "langchain parsed the arguments")
    for method in ("json_schema", "function_calling"):
        structured = llm.with_structured_output(Weather, method=method)
        out = structured.invoke("Weather in Lima?")
        check(isinstance(out, Weather), f"langchain with_structured_output ({method}): {out!r}")


def pydantic_ai_checks(base_url, model):
    provider = OpenAIProvider(base_url=base_url, api_key="unused")
    agent = Agent(OpenAIChatModel(model, provider=provider), output_type=Weather,
                  model_settings={"temperature": 0, "max_tokens": LIMIT,
                                  "parallel_tool_calls": False})
    result = agent.run_sync("Weather in Cairo?")
    check(isinstance(result.output, Weather), f"pydantic-ai output is a Weather: {result.output!r}")


def main(base_url):
    client = openai.OpenAI(base_url=base_url, api_key="unused")
    model = client.models.list().data[0].id
    openai_tool_loop(client, model)
    openai_structured(client, model)
    langchain_checks(base_url, model)
    pydantic_ai_checks(base_url, model)
    print(f"openai {openai.__version__}: every agent check passed against {base_url}")


if __name__ == "__main__":
    main(sys.argv[1])
