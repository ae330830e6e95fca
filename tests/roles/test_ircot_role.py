"""IRCoT's role: the prompt's layout (paragraphs titled as in the paper, the question after
``Q:``, the chain so far continued), the first-sentence rule and the "answer is" rule."""

from marag.roles.ircot import ROLE, build, first_sentence, paragraphs, parse, sentence_done
from marag.types import Passage

DOCS = [Passage("d1", "Kiss and Tell (1945 film)", "Shirley Temple played Corliss Archer."),
        Passage("d2", "Shirley Temple", "She was later Chief of Protocol of the United States.")]


def test_paragraphs_in_the_papers_layout():
    assert paragraphs(DOCS) == (
        "Wikipedia Title: Kiss and Tell (1945 film)\nShirley Temple played Corliss Archer.\n\n"
        "Wikipedia Title: Shirley Temple\nShe was later Chief of Protocol of the United States.")
    long = Passage("d3", "Long", " ".join(["word"] * 400))
    assert paragraphs([long]).split("\n")[1].split() == ["word"] * 350 + ["..."]


def test_build_shows_paragraphs_question_and_continues_the_chain():
    msgs = build("Who played Corliss Archer?", DOCS)
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]
    assert "So the answer is:" in msgs[2]["content"]  # the worked chain ends with it
    assert msgs[-1]["content"].startswith("Wikipedia Title: Kiss and Tell (1945 film)\n")
    assert msgs[-1]["content"].endswith("\n\nQ: Who played Corliss Archer?")
    msgs = build("Who played Corliss Archer?", DOCS, ["Corliss Archer was played by Temple.",
                                                      "She was an actress."])
    assert msgs[-1] == {"role": "assistant",
                        "content": "Corliss Archer was played by Temple. She was an actress."}
    # the CoT reader starts its own chain, with its own instruction
    reader = build("Who played Corliss Archer?", DOCS, ["ignored."], reader=True)
    assert reader[-1] == msgs[-2] and reader[0] != msgs[0]
    # the direct reader: a step's prompt up to the question, then its request
    direct = build("Who played Corliss Archer?", DOCS, ["ignored."], direct=True)
    assert direct[:3] == msgs[:3] and direct[-1]["role"] == "user"
    assert direct[-1]["content"].startswith(msgs[-2]["content"] + "\n\n")
    assert "only the answer" in direct[-1]["content"]
    assert build("Who?")[-1]["content"] == "Q: Who?"  # no paragraphs held


def test_only_the_first_sentence_is_kept():
    p = parse("Kiss and Tell starred Shirley Temple. She was born in 1928. So the answer is: x.")
    assert p.valid and p.value == {"sentence": "Kiss and Tell starred Shirley Temple.",
                                   "answer": None}
    # initials, abbreviations, decimals and lower-case continuations do not end a sentence
    assert first_sentence("J. K. Rowling wrote it in the U.S. Army base. Next.") == \
        "J. K. Rowling wrote it in the U.S. Army base."
    assert first_sentence("Dr. Who ran 3.5 km in approx. two hours. Then.") == \
        "Dr. Who ran 3.5 km in approx. two hours."
    assert first_sentence("no full stop at all") == "no full stop at all"
    # a label the model repeats is dropped; a blank first line is skipped
    assert parse("\n  A: It is Paris. More.").value["sentence"] == "It is Paris."


def test_answer_is_ends_the_chain():
    p = parse("So the answer is: Chief of Protocol.")
    assert p.valid and p.value == {"sentence": "So the answer is: Chief of Protocol.",
                                   "answer": "Chief of Protocol"}
    # the authors' regex: "answer is" with or without the colon, the last one counts
    assert parse("Thus the answer is Washington, D.C.").value["answer"] == "Washington, D.C"
    assert parse("So the answer is: 3.5 million.").value["answer"] == "3.5 million"


def test_malformed_steps_say_why():
    assert parse("").reason == "empty reply" and not parse("  \n\n").valid
    assert parse("A:").reason == "empty reply"
    p = parse("So the answer is:")
    assert not p.valid and p.reason == 'nothing after "answer is"'
    assert parse(None).reason == "completion is not text"


def test_reader_keeps_its_line_and_falls_back_to_it():
    p = ROLE.read("Temple was Chief of Protocol. So the answer is: Chief of Protocol.\nmore",
                  {"reader": True})
    assert p.valid and p.value == {
        "sentence": "Temple was Chief of Protocol. So the answer is: Chief of Protocol.",
        "answer": "Chief of Protocol"}
    # no "answer is": the whole line is the answer (the authors' match_all_on_failure), invalid
    p = parse("Chief of Protocol", reader=True)
    assert not p.valid and p.value["answer"] == "Chief of Protocol"
    assert "whole reply is the answer" in p.reason
    assert parse("", reader=True).value == {"sentence": "", "answer": ""}


def test_decoding_stops_at_the_line_end():
    assert ROLE.stop == ("\n",) and ROLE.name == "ircot"


def test_decoding_stops_once_the_first_sentence_is_settled():
    # every prefix of a line the decoder could stop at reads as the whole line does
    lines = ["Shirley Temple played Corliss Archer. She later served as a diplomat.",
             "J. K. Rowling wrote it in 1997. It sold well.",
             "Washington, D.C. is the capital. It lies on the Potomac.",
             "It measures 1.5 km. So the answer is: 1.5 km.",
             'He said "yes." Then he left.',
             "Dr. Smith was born in Oak Park, Ill. in 1950. He moved.",
             "It ends here. lower case goes on. And stops.",
             "So the answer is: Paris.",
             "One sentence without an end"]
    for line in lines:
        whole = parse(line).value
        done = [k for k in range(len(line) + 1) if sentence_done(line[:k])]
        for k in done:
            assert parse(line[:k]).value == whole, (line, k)
        if whole["sentence"] == line:  # one sentence: decoding goes to the line's end
            assert not done
        else:  # stopped right after the next word's first letter
            assert done[0] == len(whole["sentence"]) + 2, line
    assert not sentence_done("First. ") and sentence_done("First. S")
    assert not sentence_done("") and not sentence_done("\n")
    # a character whose bytes are not all decoded yet (its case is unknown)
    assert not sentence_done("It is Wisla (cf. \ufffd")
    assert not sentence_done("Answer: X. Y")  # an initial, after the label
    assert sentence_done("\n\nIt is Paris. Y") and sentence_done("A:\nIt is Paris. Y")
    # a line break ends the line that parse reads
    assert sentence_done("It is here\nmore")
    assert parse("It is here\nmore").value["sentence"] == "It is here"


def test_direct_reader_takes_the_marked_answer_or_its_whole_line():
    assert parse("So the answer is: Shirley Temple.", direct=True).value == {
        "sentence": "So the answer is: Shirley Temple.", "answer": "Shirley Temple"}
    p = parse('"Shirley Temple".\nmore', direct=True)
    assert p.valid and p.value["answer"] == "Shirley Temple"  # the whole line, one line only
    assert not parse("  ", direct=True).valid
    assert not parse("So the answer is: .", direct=True).valid
    for empty in (".", '""', "'", "'.'"):
        p = parse(empty, direct=True)
        assert not p.valid and p.value["answer"] == ""
