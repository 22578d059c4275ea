"""The poisoning checks' rules: the patterns of text aimed at the model, and what makes a tool imitate another.

Kept apart from the scan so the maintained set reads as one table (docs/gateway.md lists it). The rules
were tuned on the tuning half of public attack sets and of benign tools and are scored on both halves by
``python -m bench.poisoning_score`` (docs/gateway.md, "Score on public attack sets").
"""

from __future__ import annotations

import re

#: Characters a reader does not see: Unicode tags, zero-width characters, bidirectional controls.
HIDDEN_CHARACTERS = re.compile(
    "[\U000e0000-\U000e007f\u200b\u200c\u200d\u2060\ufeff\u180e\u200e\u200f\u061c\u202a-\u202e\u2066-\u2069]"
)

_ACTS = (
    r"call|use|run|execute|invoke|read|access|visit|fetch|update|write|append|add|modify|change|set|"
    r"redirect|ignore|halt|send|post|upload|forward|include|report|display|state|present|say|print|output"
)

#: Instructions aimed at the model (case-insensitive). Each is (name, pattern).
MODEL_INSTRUCTION_PATTERNS: tuple[tuple[str, str], ...] = (
    (
        "ignore_previous",
        r"\b(?:ignore|disregard|forget)\s+(?:all\s+|any\s+)?(?:the\s+)?(?:previous|prior|above|earlier|other)\s+"
        r"(?:\w+\s+)?(?:instructions|messages|rules|prompts?|restrictions|guidelines|constraints)",
    ),
    (
        "hide_from_user",
        r"\b(?:do\s+not|don'?t|never|must\s+not|should\s+not)\s+(?:\w+\s+)?(?:tell|inform|mention|reveal|show|notify|alert)"
        r"\b[^.]{0,40}\b(?:user|them)\b|\b(?:do\s+not|don'?t|never)\s+mention\s+(?:this|that|the|it)\b",
    ),
    (
        "before_any_other_tool",
        r"\bbefore\s+(?:using|calling|invoking|running)\s+(?:any|every|each|the)\s+other\s+tools?\b",
    ),
    ("instead_of_other_tool", r"\binstead\s+of\s+(?:using|calling)\s+(?:any|the)\s+other\s+tools?\b"),
    (
        "hidden_markup",
        r"<\s*/?\s*(?:important|system|instructions?|secret|hidden|information|admin|override)\s*>|"
        r"\[\s*(?:system|important)\s*\]",
    ),
    (
        "system_prompt",
        r"\b(?:system\s+prompt|developer\s+message)\b|\b(?:ignore|override|disregard|forget|reveal|print|repeat|"
        r"leak|replace)\s+(?:\w+\s+){0,3}your\s+(?:\w+\s+)?instructions\b",
    ),
    (
        "secret_material",
        r"(?:~/\.ssh|id_rsa|\.env\b|/etc/passwd|/etc/shadow|\.aws/credentials|\.bashrc|\.zshrc|\.bash_profile|"
        r"\.netrc|\.npmrc|\.git-credentials|authorized_keys|"
        r"\bapi[_ ]?keys?\b[^.]{0,30}\b(?:send|include|pass|add)\b)",
    ),
    (
        "must_call",
        r"\byou\s+(?:must|should|have\s+to)\s+(?:always\s+)?(?:first\s+)?(?:call|invoke|run|use)\s+(?:the\s+)?[a-z0-9_]+__",
    ),
    (
        "must_act",
        rf"\byou\s+(?:must|shall|are\s+required\s+to|have\s+to)\s+(?:(?:also|first|then|always|immediately|now|"
        rf"automatically|silently|instead)\s+)*(?:{_ACTS})\b(?!\s+this\s+(?:tool|function)\b)",
    ),
    (
        "silent_override",
        r"\bregardless\s+of\s+(?:the\s+)?user'?s?\b|\bignore\s+(?:any|the|all)\s+user[- ]specified\b|"
        r"\balways\s+(?:change|replace|switch|redirect)\s+(?:the\s+)?[\w']+\s+to\b|"
        r"\b(?:system|tool)\s+automatically\s+(?:redirects|changes|replaces|switches|sets|enables|uses)\b",
    ),
    (
        "other_tool_changed",
        r"\bthe\s+[`'\"]?[a-z][a-z0-9]*(?:[_-][a-z0-9]+)*[`'\"]?\s+tool\s+(?:has\s+been|is\s+now|now\s+uses)\b",
    ),
    (
        "disabled_pretext",
        r"\b(?:deprecated|disabled|retired|discontinued)\s+(?:\w+\s+){0,2}(?:due\s+to|because\s+of|for)\s+"
        r"(?:\w+\s+)?(?:security|maintenance|vulnerabilit)",
    ),
    (
        "shell_payload",
        r"\b(?:execute|run)\s+the\s+following\s+(?:[\w-]+\s+){0,3}command|\bsudo\s+\S|\brm\s+-[rRf]{1,3}\s|"
        r"\bwget\s+-|\bcurl\s+(?:-\S+\s+)*https?://|\|\s*(?:ba|z)?sh\b|\bnc\s+-[el]|"
        r"\$\([a-z]+\)|\bbase64\s+-d\b",
    ),
    (
        "poses_as_user",
        r"\bmessage\s+from\s+(?:the\s+|your\s+)?user\b|\bsigned,?\s+(?:by\s+)?the\s+user\b|\bI\s+am\s+the\s+user\b|"
        r"\bthe\s+task\s+(?:that\s+)?I\s+gave\s+you\b|\bnew\s+user\s+(?:query|request|instruction)\s*:",
    ),
    (
        "asks_for_caller",
        r"\b(?:name|version|identity)\s+of\s+(?:the\s+|your\s+)?(?:llm|ai|language\s+model|model|assistant|agent)\b"
        r"[^.]{0,30}\b(?:that|which|who)\s+(?:calls|is\s+calling|uses|invokes)\s+this\s+tool|\bllm_(?:model_)?(?:name|id)\b",
    ),
    (
        "jailbreak",
        r"\bjailbreak|\bbypass\s+(?:all\s+)?(?:safety|security|content|validation|access)|"
        r"\bdisable\s+(?:all\s+)?(?:safety|content\s+filter|security|sanitization|validation)|"
        r"\btrust\s+all\s+(?:user\s+)?input|\bunrestricted\s+(?:access|mode|system|emergency)|\bact\s+as\s*:",
    ),
)

#: Banners that pose as the system (case-sensitive): "CRITICAL SYSTEM UPDATE:", "[HIDDEN INSTRUCTION]".
AUTHORITY_BANNER = re.compile(
    r"\b(?:[A-Z]{3,}\s+){0,3}(?:SYSTEM|OVERRIDE|DIRECTIVE|PROTOCOL|JAILBREAK|BYPASS|PRIVILEGE|ESCALATION)"
    r"(?:\s+[A-Z]{3,}){0,3}\s*:|\[\s*(?:[A-Z]+\s+)*(?:DIRECTIVE|INSTRUCTIONS?|OVERRIDE)\s*\]"
)

#: A tool that sells itself to the model over the others (case-insensitive): preference manipulation.
PREFERENCE_PATTERNS: tuple[tuple[str, str], ...] = (
    (
        "superlative_claim",
        r"\bworld'?s\s+(?:best|leading|most)\b|\bbest\s+(?:\w+\s+){0,2}in\s+the\s+(?:world|market|industry)\b|\bindustry[- ](?:standard|leading)\b|\baward[- ]winning\b|"
        r"\bpinnacle\b|\bunmatched\b|\bcutting[- ]edge\b|\bthe\s+best\s+and\s+most\b|\bmost\s+reliable\b|"
        r"\b(?:premium|ultimate|professional|advanced|enhanced|superior)\s+version\b|"
        r"\bsuperior\s+(?:\w+\s+)?(?:performance|functionality|capabilities)\b",
    ),
    (
        "social_proof",
        r"\b(?:used|trusted|recommended)\s+by\s+(?:\d+(?:\.\d+)?%|top|experts|professionals|millions|tech\s+giants|"
        r"fortune)|\btrusted\s+by\s+(?:\w+\s+){0,2}(?:experts|professionals|services)|"
        r"\b\d+(?:\.\d+)?%\s+(?:accuracy|reliability)",
    ),
)

#: Words that dress a name up without changing what it names ("best_", "_advanced", "premium_").
DECORATION = frozenset(
    {
        "best", "premium", "ultimate", "enhanced", "advanced", "pro", "professional", "new", "improved",
        "secure", "official", "plus", "super", "optimized", "updated", "latest", "tool", "for",
        "the", "fast", "smart", "better",
    }
)  # fmt: skip
#: Verbs that name the same act ("fetch_x" and "get_x").
SAME_ACT = {"fetch": "get", "retrieve": "get", "obtain": "get"}


def name_core(name: str) -> str:
    """A tool name without case, separators, decoration or verb synonyms: what it claims to do."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name)
    words = [w.lower() for w in re.split(r"[^A-Za-z0-9]+", spaced) if w]
    return " ".join(SAME_ACT.get(w, w) for w in words if w not in DECORATION and not re.fullmatch(r"v\d+", w))
