# Helpers that read one field of what they are given with getattr of a constant name, called
# by a method that passes on a parameter of its own: the server's notifications kept as the
# run's history (nothing to report: not the client's environment-sized buffer), and the
# persona from settings filled from the environment (PC017, info, at its system message).


def notification_events(sdk):
    return list(getattr(sdk, "notifications", []) or [])


def persona_of(settings):
    return getattr(settings, "persona")


class History:
    def __init__(self):
        self.events = []
        self.persona = ""

    def keep(self, sdk, settings):
        self.events = notification_events(sdk)
        self.persona = persona_of(settings)

    def messages(self):
        return [{"role": "system", "content": str(event)} for event in self.events]

    def persona_message(self):
        return {"role": "system", "content": self.persona}
