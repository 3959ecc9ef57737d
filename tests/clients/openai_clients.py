#!/usr/bin/env python3
"""The HTTP API as the clients people use drive it: the official `openai` Python
client and `langchain-openai`, against a running main node.

    python3 tests/clients/openai_clients.py http://127.0.0.1:8080/v1

Exit 0: every check passed; 1: a check failed (the message says which);
77: the client packages are not installed (development-time tools:
`pip install openai langchain-openai`). Run by
tests/cluster/openai_clients_test.cpp against the process testbed.
"""
import sys

from client_checks import check, skip

try:
    import openai
    from langchain_openai import ChatOpenAI
except ImportError as e:  # not installed: skip
    skip(e)


def main(base_url):
    client = openai.OpenAI(base_url=base_url, api_key="unused")

    # Models: list and retrieve, with a real creation time.
    models = client.models.list().data
    check(len(models) == 1, f"one model listed, got {len(models)}")
    model = models[0].id
    check(client.models.retrieve(model).id == model, "models.retrieve returns the listed model")
    check(models[0].created > 0, "a real `created`")
    try:
        client.models.retrieve("no-such-model")
        check(False, "an unknown model id is a 404")
    except openai.NotFoundError:
        pass

    # Completions: the token limit, logprobs per generated token.
    c = client.completions.create(model=model, prompt="The meaning of life is", max_tokens=12,
                                  temperature=0, logprobs=2)
    n = c.usage.completion_tokens
    check(n == 12 or (n < 12 and c.choices[0].finish_reason == "stop"),
          f"max_tokens 12 honoured (got {n}, finish {c.choices[0].finish_reason})")
    check(len(c.choices[0].logprobs.tokens) == n, "one logprob per generated token")
    check(all(len(t) == 2 for t in c.choices[0].logprobs.top_logprobs), "top-2 alternatives")

    # Chat with max_completion_tokens (what langchain-openai sends), which wins
    # over max_tokens.
    messages = [{"role": "user", "content": "Tell me a story about a fortune cookie."}]
    chat = client.chat.completions.create(model=model, messages=messages,
                                          max_completion_tokens=7, max_tokens=30, temperature=0)
    n = chat.usage.completion_tokens
    check(n == 7 or (n < 7 and chat.choices[0].finish_reason == "stop"),
          f"max_completion_tokens 7 honoured over max_tokens 30 (got {n})")

    # Streaming with include_usage: usage null on every chunk, then one chunk
    # with no choices and the usage; none at all when not asked.
    chunks = list(client.chat.completions.create(model=model, messages=messages,
                                                 max_completion_tokens=7, temperature=0,
                                                 stream=True,
                                                 stream_options={"include_usage": True}))
    check(chunks[-1].choices == [] and chunks[-1].usage is not None,
          "a final usage chunk with empty choices")
    check(all(ch.usage is None for ch in chunks[:-1]), "no usage before the final chunk")
    streamed = "".join(ch.choices[0].delta.content or "" for ch in chunks[:-1] if ch.choices)
    check(streamed == chat.choices[0].message.content,
          "the streamed text equals the non-streamed text (greedy)")
    plain = list(client.chat.completions.create(model=model, messages=messages,
                                                max_completion_tokens=7, temperature=0,
                                                stream=True))
    check(all(ch.usage is None for ch in plain), "no usage when not asked")

    # langchain-openai: its request (max_completion_tokens, its own message
    # format) gives the same reply as the client's.
    llm = ChatOpenAI(base_url=base_url, api_key="unused", model=model, temperature=0,
                     max_completion_tokens=7)
    reply = llm.invoke(messages[0]["content"])
    usage = reply.response_metadata["token_usage"]
    check(usage["completion_tokens"] == n, f"langchain: {usage['completion_tokens']} tokens, not {n}")
    check(reply.content == chat.choices[0].message.content,
          "langchain's reply equals the client's (greedy)")
    streamed_lc = "".join(part.content for part in llm.stream(messages[0]["content"]))
    check(streamed_lc == reply.content, "langchain streaming equals its non-streamed reply")
    print(f"openai {openai.__version__}: every check passed against {base_url} (model {model})")


if __name__ == "__main__":
    main(sys.argv[1])
