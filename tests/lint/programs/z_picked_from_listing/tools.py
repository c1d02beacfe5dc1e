import json
import os


class ToolManager:
    def __init__(self, apis_dir: str = "apis") -> None:
        apis = []
        for file in os.listdir(apis_dir):
            if file.endswith(".json"):
                with open(os.path.join(apis_dir, file)) as f:
                    spec = json.load(f)
                apis.append({"name": file[:-5], "description": spec["description"]})
        self.apis = apis

    def get_api_by_name(self, name: str) -> dict:
        # one element, found by its name: whichever order the folder lists them in
        for api in self.apis:
            if api["name"] == name:
                return api
        raise KeyError(name)

    def get_api_description(self, name: str) -> str:
        return json.dumps(self.get_api_by_name(name).copy())

    def first_api(self) -> dict:
        # the first element listed: which one it is, is the folder's order
        for api in self.apis:
            return api
        raise KeyError("no api")

    def first_description(self) -> str:
        return json.dumps(self.first_api())
