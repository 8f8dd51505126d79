"""`tunelab inspect`: the examples as the trainer sees them, and what is wrong with them.

`lab` renders a sample of each split with the trainer's own code and makes the findings (`run`
makes the same ones before it trains); beside it, by the shape of the task: `turns`
(conversations), `format` (format adherence), `windows` (a pretrain lab scored past its trained
length), `images` and `pixels` (an image lab as stored and as the model receives it); `findings`
says which codes block.
"""
