# Stored conversations: a record whose messages come from the database (keys unknown here).
from peewee import Model, TextField


class Conversation(Model):
    message = TextField()
