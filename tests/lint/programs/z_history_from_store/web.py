import quart


async def get_request_json():
    return await quart.request.get_json()
