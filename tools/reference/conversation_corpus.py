"""Conversation corpus for the chat-template goldens (see render_templates.py).

Covers system/user/assistant/tool turns, content as a string or a list of parts (text, image,
image_url, video, audio), tool definitions, tool_calls with arguments as a dict and as a JSON string,
reasoning_content, `<think>` blocks in history, None-valued fields, unicode and template-like text,
empty content and long multi-turn chats. Each conversation is rendered under the variants returned by
variants_for(); a variant is add_generation_prompt plus extra template kwargs.
"""

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_current_weather",
        "description": "Get the current weather in a given location",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Temperature unit"},
            },
            "required": ["location"],
        },
    },
}

SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search_web",
        "description": "Search the web. Returns the top results as a list.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Search query (UTF-8, e.g. \"météo à Paris\")"},
                "max_results": {"type": "integer", "description": "How many results", "default": 5},
                "filters": {
                    "type": "object",
                    "description": "Optional filters",
                    "additionalProperties": {"type": "string"},
                },
                "tags": {"type": "array", "items": {"type": "string"}, "description": "Tags"},
                "threshold": {"type": ["number", "null"], "description": "Score threshold"},
            },
            "required": ["query"],
        },
        "return": {"type": "array", "description": "Result snippets"},
    },
}

NO_ARGS_TOOL = {
    "type": "function",
    "function": {"name": "get_time", "description": "Current time", "parameters": {"type": "object", "properties": {}}},
}

CALL_WEATHER = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_current_weather", "arguments": {"location": "Paris, France", "unit": "celsius"}},
}

CALL_WEATHER_STR = {
    "id": "call_2",
    "type": "function",
    "function": {"name": "get_current_weather", "arguments": "{\"location\": \"Tokyo\", \"unit\": \"celsius\"}"},
}

CALL_SEARCH = {
    "id": "call_3",
    "type": "function",
    "function": {
        "name": "search_web",
        "arguments": {"query": "日本 天気 ☀", "max_results": 3, "threshold": 0.25, "filters": {"lang": "ja"},
                      "tags": ["news", "weather"], "exact": True, "cursor": None},
    },
}

CONVERSATIONS = [
    {"id": "user_only", "messages": [{"role": "user", "content": "Hello!"}]},
    {"id": "system_user", "messages": [
        {"role": "system", "content": "You are a concise assistant."},
        {"role": "user", "content": "What is 2 + 2?"}]},
    {"id": "multi_turn", "messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Hi, who are you?"},
        {"role": "assistant", "content": "I am an assistant."},
        {"role": "user", "content": "Tell me a joke."}]},
    {"id": "no_system_multi_turn", "messages": [
        {"role": "user", "content": "First question"},
        {"role": "assistant", "content": "First answer"},
        {"role": "user", "content": "Second question"},
        {"role": "assistant", "content": "Second answer"}]},
    {"id": "empty_content", "messages": [
        {"role": "system", "content": ""},
        {"role": "user", "content": ""},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "ok"}]},
    {"id": "unicode", "messages": [
        {"role": "user", "content": "héllo wörld — 你好，世界 🎉👩‍💻 Ελληνικά עברית \u2028 line sep \u00a0nbsp\ttab"},
        {"role": "assistant", "content": "¡Hola! こんにちは 😀"},
        {"role": "user", "content": "\"double\" 'single' \\backslash\\ `tick`"}]},
    {"id": "template_like_text", "messages": [
        {"role": "user", "content": "{{ messages }} {% if x %} {# c #} <|im_start|>user <|eot_id|> </think> <tool_call>"},
        {"role": "assistant", "content": "{% raw %}not a tag{% endraw %} }} %} #}"}]},
    {"id": "whitespace_edges", "messages": [
        {"role": "system", "content": "  padded system  \n\n"},
        {"role": "user", "content": "\n\n  leading and trailing whitespace \t \n"},
        {"role": "assistant", "content": "   \n answer with spaces \n   "},
        {"role": "user", "content": "line1\nline2\r\nline3"}]},
    {"id": "name_and_null_fields", "messages": [
        {"role": "system", "content": "sys", "name": None},
        {"role": "user", "content": "Hi", "name": "alice"},
        {"role": "assistant", "content": "Hello alice", "tool_calls": None, "reasoning_content": None},
        {"role": "user", "content": "Bye"}]},
    {"id": "assistant_last", "messages": [
        {"role": "user", "content": "Continue this sentence: The sky is"},
        {"role": "assistant", "content": "blue because"}]},
    {"id": "system_not_first", "messages": [
        {"role": "user", "content": "Hi"},
        {"role": "system", "content": "Late system message"},
        {"role": "user", "content": "Hi again"}]},
    {"id": "only_system", "messages": [{"role": "system", "content": "Only a system prompt."}]},
    {"id": "long_conversation", "messages": (
        [{"role": "system", "content": "Count with the user."}] +
        [m for i in range(1, 8) for m in (
            {"role": "user", "content": f"Number {i}?"},
            {"role": "assistant", "content": f"{i} — number {i} is {'odd' if i % 2 else 'even'}."})] +
        [{"role": "user", "content": "Done."}])},
    {"id": "tools_system", "tools": [WEATHER_TOOL, SEARCH_TOOL], "messages": [
        {"role": "system", "content": "You are a weather bot."},
        {"role": "user", "content": "What's the weather like in Paris?"}]},
    {"id": "tools_no_system", "tools": [WEATHER_TOOL, NO_ARGS_TOOL], "messages": [
        {"role": "user", "content": "Weather in Boston?"}]},
    {"id": "tool_call_dict_args", "tools": [WEATHER_TOOL], "messages": [
        {"role": "system", "content": "You are a weather bot."},
        {"role": "user", "content": "What's the weather like in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [CALL_WEATHER]},
        {"role": "tool", "tool_call_id": "call_1", "name": "get_current_weather", "content": "{\"temperature\": 22, \"condition\": \"sunny\"}"},
        {"role": "assistant", "content": "It is 22°C and sunny in Paris."},
        {"role": "user", "content": "Thanks!"}]},
    {"id": "tool_call_string_args", "tools": [WEATHER_TOOL], "messages": [
        {"role": "user", "content": "Weather in Tokyo?"},
        {"role": "assistant", "content": None, "tool_calls": [CALL_WEATHER_STR]},
        {"role": "tool", "tool_call_id": "call_2", "content": "15 degrees, rain"}]},
    {"id": "parallel_tool_calls", "tools": [WEATHER_TOOL, SEARCH_TOOL], "messages": [
        {"role": "user", "content": "Weather in Paris and search for Tokyo weather news"},
        {"role": "assistant", "content": "Let me check both.", "tool_calls": [CALL_WEATHER, CALL_SEARCH]},
        {"role": "tool", "tool_call_id": "call_1", "content": "22C sunny"},
        {"role": "tool", "tool_call_id": "call_3", "content": "[\"Rain expected\", \"Typhoon warning\"]"},
        {"role": "assistant", "content": "Paris: 22C. Tokyo: rain."}]},
    {"id": "tool_call_without_function_key", "tools": [WEATHER_TOOL], "messages": [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "tool_calls": [{"name": "get_current_weather", "arguments": {"location": "Rome"}}]},
        {"role": "tool", "content": "warm"}]},
    {"id": "tool_content_object", "tools": [WEATHER_TOOL], "messages": [
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": "", "tool_calls": [CALL_WEATHER]},
        {"role": "tool", "content": {"temperature": -3, "snow": True, "note": "❄"}}]},
    {"id": "reasoning_content", "messages": [
        {"role": "user", "content": "What is 17 * 3?"},
        {"role": "assistant", "reasoning_content": "17 * 3 = 51.", "content": "51"},
        {"role": "user", "content": "And 51 + 9?"},
        {"role": "assistant", "reasoning_content": "\n51 + 9 = 60\n", "content": "\n\n60"}]},
    {"id": "think_in_content", "messages": [
        {"role": "user", "content": "Solve x + 1 = 3"},
        {"role": "assistant", "content": "<think>\nSubtract 1 from both sides.\n</think>\n\nx = 2"},
        {"role": "user", "content": "Now x + 2 = 5"}]},
    {"id": "reasoning_alias_thinking", "messages": [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "thinking": "greet back", "content": "Hello!"},
        {"role": "user", "content": "Again"},
        {"role": "assistant", "reasoning": "older field name", "content": "Hi again"}]},
    {"id": "multi_step_tools", "tools": [WEATHER_TOOL, SEARCH_TOOL], "messages": [
        {"role": "system", "content": "Use tools when useful."},
        {"role": "user", "content": "Plan a picnic in Paris."},
        {"role": "assistant", "reasoning_content": "Need the weather first.", "content": "", "tool_calls": [CALL_WEATHER]},
        {"role": "tool", "content": "22C sunny"},
        {"role": "assistant", "reasoning_content": "Now find parks.", "content": "Checking parks.", "tool_calls": [CALL_SEARCH]},
        {"role": "tool", "content": "Parc Monceau; Jardin du Luxembourg"},
        {"role": "assistant", "reasoning_content": "Summarise.", "content": "Go to Parc Monceau — it is sunny."}]},
    {"id": "tool_response_as_user", "messages": [
        {"role": "user", "content": "Question"},
        {"role": "assistant", "content": "<think>\nlook it up\n</think>\n\ncalling"},
        {"role": "user", "content": "<tool_response>\nresult\n</tool_response>"},
        {"role": "assistant", "content": "<think>\ngot it\n</think>\n\nThe answer is 42."}]},
    {"id": "parts_text", "messages": [
        {"role": "system", "content": [{"type": "text", "text": "System as parts."}]},
        {"role": "user", "content": [{"type": "text", "text": "Part one. "}, {"type": "text", "text": "Part two."}]}]},
    {"id": "parts_image", "messages": [
        {"role": "user", "content": [
            {"type": "image", "image": "https://example.com/cat.jpg"},
            {"type": "text", "text": "What is in this image?"}]}]},
    {"id": "parts_image_url", "messages": [
        {"role": "system", "content": "You describe images."},
        {"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            {"type": "text", "text": "Describe."}]},
        {"role": "assistant", "content": "A tiny PNG."},
        {"role": "user", "content": [
            {"type": "text", "text": "Compare with these two:"},
            {"type": "image", "url": "https://example.com/a.png"},
            {"type": "image", "path": "/tmp/b.png"}]}]},
    {"id": "parts_video", "messages": [
        {"role": "user", "content": [
            {"type": "video", "video": ["f1.jpg", "f2.jpg"]},
            {"type": "text", "text": "What happens in the video?"}]}]},
    {"id": "parts_audio", "messages": [
        {"role": "system", "content": "You are Qwen, a virtual human developed by the Qwen Team."},
        {"role": "user", "content": [
            {"type": "audio", "audio": "https://example.com/speech.wav"},
            {"type": "text", "text": "Transcribe this."}]}]},
    {"id": "parts_mixed_media", "messages": [
        {"role": "user", "content": [
            {"type": "text", "text": "Look and listen: "},
            {"type": "image", "image": "a.jpg"},
            {"type": "audio", "audio_url": "b.wav"},
            {"type": "video", "video": "c.mp4"},
            {"type": "image_url", "image_url": {"url": "d.jpg"}}]},
        {"role": "assistant", "content": [{"type": "text", "text": "I see and hear things."}]},
        {"role": "user", "content": [{"type": "image", "image": "e.jpg"}, {"type": "text", "text": "And this?"}]}]},
    {"id": "parts_unknown_type", "messages": [
        {"role": "user", "content": [{"type": "input_file", "file": "x.pdf"}, {"type": "text", "text": "Summarise"}]}]},
    {"id": "documents", "documents": [
        {"title": "Doc A", "text": "Alpha content."},
        {"title": "Doc B", "text": "Beta content with ünïcode."}], "messages": [
        {"role": "user", "content": "Summarise the documents."}]},
    {"id": "empty_tools_list", "tools": [], "messages": [
        {"role": "user", "content": "No tools really."}]},
    {"id": "two_tool_calls_llama_error", "tools": [WEATHER_TOOL], "messages": [
        {"role": "user", "content": "Paris and Tokyo"},
        {"role": "assistant", "content": "", "tool_calls": [CALL_WEATHER, CALL_WEATHER_STR]}]},
    {"id": "ipython_role", "tools": [WEATHER_TOOL], "messages": [
        {"role": "user", "content": "Run it"},
        {"role": "assistant", "content": "", "tool_calls": [CALL_WEATHER]},
        {"role": "ipython", "content": "done"}]},
]

# add_generation_prompt + extra template kwargs.
VARIANTS = {
    "gen": {"add_generation_prompt": True},
    "nogen": {"add_generation_prompt": False},
    "kwargs_a": {"add_generation_prompt": True, "extra": {
        "enable_thinking": False, "add_vision_id": True, "add_audio_id": True,
        "tools_in_user_message": False, "date_string": "01 Jan 2025"}},
    "kwargs_b": {"add_generation_prompt": True, "extra": {
        "enable_thinking": True, "builtin_tools": ["code_interpreter", "brave_search"],
        "custom_tools": [NO_ARGS_TOOL]}},
}

_WITH_KWARGS = {"user_only", "multi_turn", "tools_system", "tool_call_dict_args", "reasoning_content",
                "think_in_content", "multi_step_tools", "parts_image_url", "parts_mixed_media", "parts_audio",
                "assistant_last"}


def variants_for(model, conv):
    names = ["gen", "nogen"]
    if conv["id"] in _WITH_KWARGS:
        names += ["kwargs_a", "kwargs_b"]
    return names
