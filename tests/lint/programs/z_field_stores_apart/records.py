# A dialog record read from the database: its fields are unknown to the linter.
from peewee import Model, TextField


class Dialog(Model):
    prompt = TextField()
    kb_ids = TextField()
